"""The fast paths of core/model.py's GPT, as functions that run a GPT's own modules (the teaching model carries no
argument for them); tests/core/test_fast.py checks each against GPT.forward.

- Decoding with a KV cache: `KVCache`, `forward(model, ids, cache=cache)` (with `last`: the last position's logits
  alone, as a prefill needs) and `fill` (keys and values only).
- Packed rows (sampling.Layout): `forward(model, ids, pos=, mask=, keep=, want=)`, several sequences in a row with
  their own positions and mask, only the real tokens run ("unpadding"), only the wanted logits computed.
- Training: `loss` and `logits_at`, which run only what the counted targets need.
- `forward(model, ids, shift=)`: a per-row shift of the token embeddings (methods.readers).

Shapes as in core/model.py; N: the real positions of a flattened (B * T) batch.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from .model import GPT, Attention, Block, GPTConfig

PACKED_BMM_T = 64
"""Packed rows up to this long attend through baddbmm (GRPO's packed rows are shorter); longer ones through SDPA,
whose flash kernel tiles and is faster there than materialised scores."""

DECODE_ROWS = 256
"""From this many rows a decode step's attention is _decode_attention; below it SDPA. Alone the elementwise form
wins from fewer rows, but RL's rollouts, whose decode steps run few distinct prefixes, cost the same with either
(docs/performance.md)."""


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

    def _with(self, kv: torch.Tensor, store: torch.Tensor | None = None) -> KVCache:
        """A cache holding kv (a view of store, default kv itself), at this cache's positions."""
        out = KVCache.__new__(KVCache)
        out.kv, out.store, out.start, out.pos = kv, kv if store is None else store, self.start, self.pos
        return out

    def rows(self, a: int, b: int) -> KVCache:
        """A cache over rows a..b-1 of this one that writes into this cache's storage (a forward in row chunks)."""
        return self._with(self.kv[:, :, :, a:b])

    def select(self, rows: torch.Tensor, capacity: int | None = None) -> KVCache:
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


def forward(model: GPT, ids: torch.Tensor, cache: KVCache | None = None, pos: torch.Tensor | None = None,
            mask: torch.Tensor | None = None, keep: torch.Tensor | None = None, want: torch.Tensor | None = None,
            last: bool = False, shift: torch.Tensor | None = None) -> torch.Tensor:
    """model(ids)[0], the logits (B, T, V) of ids (B, T), through the fast paths the arguments ask for.

    cache: ids continue the cached sequence (their positions start where the cache ends), and their keys and values
    are appended to it. last (with a cache): the logits of the last position alone, (B, 1, V); the other positions
    are needed for their keys and values only, so the last block goes on past attention at the last position alone
    (a prefill of a 10-token prompt does a fifth less work).
    pos (B, T) and mask (B, 1, T, T) (additive 0 / -inf, or boolean True = may attend), without a cache: in place of
    the positions 0..T-1 and the causal mask, several sequences packed into one row (sampling.Layout). Every query
    must be allowed at least one key (a row of -inf alone gives NaN).
    keep (N,) (with pos and mask): the real positions of the flattened (B * T) batch. Only they run through the
    per-token layers, padded back for attention alone, and the logits are (N, V) ("unpadding", as in flash-attn's
    bert_padding.unpad_input; a quarter of a packed batch is padding). want (M,) (with keep): the indices among
    those N whose logits are wanted, sorted; the last block goes on past attention only there and the logits are
    (M, V) (a packed RL row wants none of its prompt's but the last).
    shift (B, T, C) (without keep or a cache): added to the token embeddings, a reading that differs per row.
    """
    B, T = ids.shape
    if keep is not None and (pos is None or mask is None or mask.shape[0] != B or cache is not None):
        raise ValueError("keep needs pos and a (B, 1, T, T) mask, and no cache")
    if want is not None and keep is None:
        raise ValueError("want needs keep")
    if shift is not None and (keep is not None or cache is not None or shift.shape != (B, T, model.cfg.d_model)):
        raise ValueError("shift is (B, T, C) and goes without keep or a cache")
    if last and cache is None:
        raise ValueError("last needs a cache")
    start = cache.pos if cache is not None else 0
    if pos is None:
        pos = torch.arange(start, start + T, device=ids.device)
        if start + T > model.cfg.max_len:
            raise ValueError(f"sequence of {start + T} tokens exceeds max_len {model.cfg.max_len}")
    elif pos.numel() and int(pos.max()) >= model.cfg.max_len:
        raise ValueError(f"position {int(pos.max())} exceeds max_len {model.cfg.max_len}")
    if keep is not None:
        ids, pos = ids.reshape(-1)[keep], pos.reshape(-1)[keep]
        dtype = model.tok.weight.dtype
        mask = additive(mask, dtype) if mask.dtype == torch.bool else mask.to(dtype)
        if T <= PACKED_BMM_T:   # one per head, once for every layer: the bmm attention adds it to its scores
            mask = mask.expand(B, model.cfg.n_heads, T, T).contiguous()
    x = model.tok(ids) + model.pos(pos)   # (B, T, C), or (N, C) with keep
    if shift is not None:
        x = x + shift
    final = len(model.blocks) - 1
    for i, block in enumerate(model.blocks):
        x = _block(block, x, cache, i, mask, keep, (B, T), sub=want if i == final else None, last=last and i == final)
    return model.head(model.ln_f(x))   # (B, T, V), (B, 1, V) with last, or (N, V) / (M, V) with keep


def fill(model: GPT, ids: torch.Tensor, cache: KVCache) -> None:
    """Write the keys and values of ids (B, T), which continue the cached sequence, into the cache, and nothing
    else: a prompt head whose cache rows are copied out before the rest of the prompt runs (sampling._prefill).
    The last block stops at its keys and values."""
    if cache.pos + ids.shape[1] > model.cfg.max_len:
        raise ValueError(f"sequence of {cache.pos + ids.shape[1]} tokens exceeds max_len {model.cfg.max_len}")
    x = model.tok(ids) + model.pos(torch.arange(cache.pos, cache.pos + ids.shape[1], device=ids.device))
    for i, block in enumerate(model.blocks):
        x = _block(block, x, cache, i, kv_only=i == len(model.blocks) - 1)


def loss(model: GPT, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """model(ids, targets)[1] (mean cross-entropy, IGNORE = -100 skipped) for training, with less work.

    Only what the counted targets depend on runs: each row up to its last counted target (the padding after it
    cannot reach them: attention is causal) goes through the per-token layers unpadded (padded back for attention
    alone), and the last block continues past its attention only at the counted positions (the prompt is there for
    its keys and values). A base-recipe batch has 3/4 of its positions real and about half of those counted. Same
    loss as forward up to float rounding (another summation order).
    """
    counted = targets != -100
    return F.cross_entropy(logits_at(model, ids, counted), targets[counted])


def logits_at(model: GPT, ids: torch.Tensor, counted: torch.Tensor) -> torch.Tensor:
    """model(ids)[0][counted] ((N, V), row-major order) with loss's saving: the work the `counted` (B, T) positions
    need. The training path of `loss` and of a verifier's BCE."""
    B, T = ids.shape
    if T > model.cfg.max_len:
        raise ValueError(f"sequence of {T} tokens exceeds max_len {model.cfg.max_len}")
    needed = counted.flip(1).cumsum(1).flip(1) > 0          # a counted target at or after this position
    keep = needed.view(-1).nonzero().squeeze(1)             # (N,) flat positions that run
    sub = counted.view(-1)[keep].nonzero().squeeze(1)       # which of them are counted
    x = model.tok(ids.reshape(-1)[keep]) + model.pos(keep % T)
    final = len(model.blocks) - 1
    for i, block in enumerate(model.blocks):
        x = _block(block, x, None, i, None, keep, (B, T), sub=sub if i == final else None)
    return model.head(model.ln_f(x))


def _block(block: Block, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0,
           mask: torch.Tensor | None = None, keep: torch.Tensor | None = None, grid: tuple | None = None,
           sub: torch.Tensor | None = None, last: bool = False, kv_only: bool = False) -> torch.Tensor | None:
    """Block.forward with the fast paths. keep (N,) (x: the (N, C) real tokens of a padded grid = (B, T) batch) and
    mask: as in `forward`. sub (with keep): only rows sub of x go on past attention (every row still gives its key
    and value). With a cache: last, only the last position goes on past attention ((B, 1, C)); kv_only, the block
    writes its keys and values and gives nothing."""
    if kv_only:
        return _attention(block.attn, block.ln1(x), cache, layer, kv_only=True)
    h = _attention(block.attn, block.ln1(x), cache, layer, mask, keep, grid, None if sub is None else keep[sub], last)
    x = (x[:, -1:] if last else x if sub is None else x.index_select(0, sub)) + h
    return x + block.mlp(block.ln2(x))


def _attention(attn: Attention, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0,
               mask: torch.Tensor | None = None, keep: torch.Tensor | None = None, grid: tuple | None = None,
               out: torch.Tensor | None = None, last: bool = False, kv_only: bool = False) -> torch.Tensor | None:
    """Attention.forward with the fast paths. out (with keep): the flat positions (a subset of keep) whose outputs
    are wanted, default keep; the output is then (len(out), C). Cache, last and kv_only as in `_block`."""
    qkv = attn.qkv(x)
    if keep is not None:   # x holds the (N, C) real tokens of a padded (B, T) batch: pad them for attention only
        B, T = grid
        qkv = qkv.new_zeros(B * T, qkv.shape[-1]).index_copy(0, keep, qkv).view(B, T, -1)
    B, T, C = qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3
    qkv = qkv.view(B, T, 3, attn.n_heads, C // attn.n_heads).permute(2, 0, 3, 1, 4)  # (3, B, H, T, D)
    idx = keep if out is None else out
    if cache is not None:
        y = _cached_attention(qkv, cache, layer, last, kv_only)
        if y is None:
            return None
    elif keep is not None and (mask is None or T <= PACKED_BMM_T):
        return attn.proj(_bmm_attention(qkv, mask, idx))
    else:
        q, k, v = qkv
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)
    T = y.shape[2]   # 1 with last
    y = y.transpose(1, 2).reshape(B, T, C)
    return attn.proj(y if keep is None else y.view(B * T, C).index_select(0, idx))


def _bmm_attention(qkv: torch.Tensor, mask: torch.Tensor | None, idx: torch.Tensor) -> torch.Tensor:
    """Attention of qkv (3, B, H, T, D) at the flat positions idx of the (B, T) grid: (len(idx), C); causal, or
    under the per-head additive mask (B, H, T, T).
    Training (`loss`: plain causal) and scoring packed rows (RL: the mask): three batched GEMM-sized ops run forward
    + backward in 3/4 of the time of SDPA's CPU flash kernel at T <= 24, which tiles for long sequences, and in
    less at RL's masked rows."""
    _, B, H, T, D = qkv.shape
    q, k, v = qkv.reshape(3, B * H, T, D)            # one copy for the three
    bias = _causal(T, q.device, q.dtype).expand(B * H, T, T) if mask is None else mask.view(B * H, T, T)
    s = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=D ** -0.5)
    y = s.softmax(-1).bmm(v).view(B, H, T, D).permute(0, 2, 1, 3)   # (B, T, H, D), a view
    # gather the wanted positions straight from the view: one copy, not a reshape's and then a select's
    return y[idx // T, idx % T].reshape(len(idx), H * D)


def _cached_attention(qkv: torch.Tensor, cache: KVCache, layer: int, last: bool, kv_only: bool) -> torch.Tensor | None:
    """Append the block's keys and values (qkv (3, B, H, T, D)) to the cache and attend over everything cached:
    (B, H, T, D), (B, H, 1, D) with last, None with kv_only."""
    q, k, v = qkv
    B, T = q.shape[0], q.shape[2]
    kt, vt = cache.append(layer, qkv[1:])             # (pos, B, H, D): everything so far, time-major
    if kv_only:
        return None
    if last and T > 1:    # the block's last query sees every key so far: no mask
        q, T = q[:, :, -1:], 1
    if T == 1 and B >= DECODE_ROWS:    # a decode step over many rows: one query against <= 24 keys
        return _decode_attention(q[:, :, 0], kt, vt)[:, :, None]
    if cache.start == 0 and T > 1:                    # a first block (the prompt): plainly causal
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # a few decoding rows, or a block after cached ones (prompt heads shared)
    mask = None if T == 1 else cache.block_mask(q.device)
    return F.scaled_dot_product_attention(q, kt.permute(1, 2, 0, 3), vt.permute(1, 2, 0, 3), attn_mask=mask)


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


def additive(allowed: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """A boolean attention mask (True = may attend) as 0 / -inf scores: the form SDPA uses inside, so converting
    once per pass, not once per layer, gives the same numbers and saves a third of a masked forward on CPU."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, float("-inf"))
