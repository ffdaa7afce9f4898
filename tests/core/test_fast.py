"""The fast paths (core/fast.py) against the plain GPT.forward: decoding with the KV cache, the cache's rows, select
and grow, packed rows (pos, mask, keep, want), the training loss and logits_at, embedding shifts."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reasonlab.core import fast
from reasonlab.core.fast import KVCache
from reasonlab.train.sft import build_model, make_sequences, split_targets

# logits reach ~20 on the noisy model: float32 rounding of another summation order reaches 2e-5 on some inputs (and
# another CPU rounds otherwise); a wrong key, position or mask moves them by O(1)
ATOL = 1e-4


@pytest.fixture(params=[256, 1], ids=["decode-sdpa", "decode-elementwise"])
def decode_rows(request, monkeypatch):
    """Both decode attentions: SDPA below fast.DECODE_ROWS rows, the elementwise one from it."""
    monkeypatch.setattr(fast, "DECODE_ROWS", request.param)
    return request.param


@pytest.fixture(params=[64, 0], ids=["packed-bmm", "packed-sdpa"])
def bmm_t(request, monkeypatch):
    """Both attentions of packed rows: baddbmm up to fast.PACKED_BMM_T positions, SDPA past it."""
    monkeypatch.setattr(fast, "PACKED_BMM_T", request.param)
    return request.param


def test_kv_cache_decoding_equals_the_full_forward(noisy_model, decode_rows):
    """A prefill, a block of three, then single steps: the logits of one forward over the whole sequence."""
    x = torch.randint(0, 18, (5, 22), generator=torch.Generator().manual_seed(0))
    full, _ = noisy_model(x)
    cache = KVCache(noisy_model.cfg, 5)
    parts = [fast.forward(noisy_model, x[:, :10], cache=cache)]          # prefill
    parts.append(fast.forward(noisy_model, x[:, 10:13], cache=cache))    # a block after cached positions
    for t in range(13, 22):                                               # then one token at a time
        parts.append(fast.forward(noisy_model, x[:, t:t + 1], cache=cache))
    assert cache.pos == 22
    assert torch.allclose(torch.cat(parts, 1), full, atol=ATOL)


def test_fill_and_last_write_the_full_cache_and_the_last_logits(noisy_model, decode_rows):
    """A prefill's shortcuts (the last block stops at its keys and values, or goes on at the last position alone)
    leave the same cache as the plain cached forward, and `last` gives its last logits; decoding goes on alike."""
    x = torch.randint(0, 18, (5, 14), generator=torch.Generator().manual_seed(1))
    plain = KVCache(noisy_model.cfg, 5)
    fast.forward(noisy_model, x[:, :4], cache=plain)
    want = fast.forward(noisy_model, x[:, 4:11], cache=plain)[:, -1:]
    assert torch.allclose(want, noisy_model(x[:, :11])[0][:, -1:], atol=ATOL)
    short = KVCache(noisy_model.cfg, 5)
    assert fast.fill(noisy_model, x[:, :4], short) is None and short.pos == 4
    got = fast.forward(noisy_model, x[:, 4:11], cache=short, last=True)
    assert got.shape == (5, 1, 18) and torch.allclose(got, want, atol=1e-5)
    assert short.pos == plain.pos == 11 and torch.allclose(short.kv[:, :, :11], plain.kv[:, :, :11], atol=1e-5)
    first = KVCache(noisy_model.cfg, 5)                          # `last` on a first block (plainly causal)
    assert torch.allclose(fast.forward(noisy_model, x[:, :11], cache=first, last=True), want, atol=1e-5)
    for t in range(11, 14):
        assert torch.allclose(fast.forward(noisy_model, x[:, t:t + 1], cache=short),
                              fast.forward(noisy_model, x[:, t:t + 1], cache=plain), atol=1e-5)


def test_cache_rows_write_into_the_whole_cache(noisy_model):
    """A forward in row chunks through cache.rows fills the parent cache as one forward over every row does."""
    x = torch.randint(0, 18, (7, 9), generator=torch.Generator().manual_seed(2))
    whole = KVCache(noisy_model.cfg, 7)
    want = fast.forward(noisy_model, x, cache=whole)
    chunked = KVCache(noisy_model.cfg, 7)
    parts = []
    for a in range(0, 7, 3):
        part = chunked.rows(a, a + 3)
        assert part.batch == min(3, 7 - a) and part.store.data_ptr() == chunked.kv[:, :, :, a:].data_ptr()
        parts.append(fast.forward(noisy_model, x[a:a + 3], cache=part))
    chunked.start, chunked.pos = part.start, part.pos
    assert torch.allclose(torch.cat(parts), want, atol=1e-5)
    assert torch.allclose(chunked.kv[:, :, :9], whole.kv[:, :, :9], atol=1e-5)
    nxt = torch.randint(0, 18, (7, 1))
    assert torch.allclose(fast.forward(noisy_model, nxt, cache=chunked)[:, -1],
                          noisy_model(torch.cat([x, nxt], 1))[0][:, -1], atol=ATOL)


def test_cache_select_shares_a_prefix(noisy_model, decode_rows):
    """Selecting rows (0, 0, 0, 1, 1, 1) continues each cached prefix three ways, as if each were run in full."""
    x = torch.randint(0, 18, (2, 10), generator=torch.Generator().manual_seed(3))
    cache = KVCache(noisy_model.cfg, 2)
    fast.forward(noisy_model, x, cache=cache)
    rep = cache.select(torch.arange(2).repeat_interleave(3), capacity=8)
    assert rep.batch == 6 and rep.capacity == 8 and rep.pos == 10
    nxt = torch.randint(0, 18, (6, 1))
    got = fast.forward(noisy_model, nxt, cache=rep)
    want, _ = noisy_model(torch.cat([x.repeat_interleave(3, 0), nxt], 1))
    assert torch.allclose(got[:, -1], want[:, -1], atol=ATOL)


def test_cache_grows_rows_in_place(noisy_model, decode_rows):
    """grow appends copies of rows in the spare capacity and leaves the others where they are; decoding goes on
    from the copies as from their originals; past the capacity it refuses."""
    x = torch.tensor([[1, 10, 11], [1, 12, 13], [1, 14, 15]])
    cache = KVCache(noisy_model.cfg, 3, capacity=5)
    with torch.inference_mode():
        fast.forward(noisy_model, x, cache=cache)
        before, store = cache.kv.clone(), cache.store.data_ptr()
        cache.grow(torch.tensor([2, 0]))
        nxt = torch.tensor([[4], [5], [6], [7], [8]])
        got = fast.forward(noisy_model, nxt, cache=cache)[:, -1]
        want = noisy_model(torch.cat([x[[0, 1, 2, 2, 0]], nxt], 1))[0][:, -1]
    assert cache.batch == 5 and cache.store.data_ptr() == store == cache.kv.data_ptr()   # a view of the same store
    assert torch.equal(cache.kv[:, :, :3, :3], before[:, :, :3])
    assert torch.equal(cache.kv[:, :, :3, 3], before[:, :, :3, 2])
    assert torch.equal(cache.kv[:, :, :3, 4], before[:, :, :3, 0])
    assert torch.allclose(got, want, atol=ATOL)
    with pytest.raises(ValueError, match="capacity"):
        cache.grow(torch.tensor([1]))


def test_decode_attention_is_the_softmax():
    """_decode_attention (elementwise, over the time-major cache) equals softmax(q k^T / sqrt(D)) v."""
    g = torch.Generator().manual_seed(4)
    q, kt, vt = torch.randn(6, 4, 16, generator=g), 3 * torch.randn(9, 6, 4, 16, generator=g), torch.randn(9, 6, 4, 16, generator=g)
    k, v = kt.permute(1, 2, 0, 3), vt.permute(1, 2, 0, 3)                       # (B, H, pos, D)
    want = ((q[:, :, None] @ k.transpose(-2, -1)) / 4).softmax(-1) @ v          # (B, H, 1, D)
    assert torch.allclose(fast._decode_attention(q, kt, vt), want[:, :, 0], atol=1e-5)


def test_a_packed_row_gives_each_sequence_its_own_logits(noisy_model, bmm_t):
    """A shared prefix, then two continuations at the positions they have in their own sequences, with a mask
    that hides each continuation from the other: the logits of running each sequence alone."""
    pre, a, b = [1, 9, 12, 3], [5, 11, 13], [6, 10]
    row = torch.tensor([pre + a + b])
    pos = torch.tensor([list(range(7)) + [4, 5]])
    seg = torch.tensor([0] * 4 + [1] * 3 + [2] * 2)
    mask = ((seg[None, :] == 0) | (seg[None, :] == seg[:, None])) & torch.ones(9, 9, dtype=torch.bool).tril()
    packed = fast.forward(noisy_model, row, pos=pos, mask=mask[None, None])
    alone_a, _ = noisy_model(torch.tensor([pre + a]))
    alone_b, _ = noisy_model(torch.tensor([pre + b]))
    assert torch.allclose(packed[0, :7], alone_a[0], atol=ATOL)
    assert torch.allclose(packed[0, 7:], alone_b[0, 4:], atol=ATOL)
    # padded to two rows, with keep naming the real positions: the same logits, for those positions only
    rows = torch.cat([row, torch.zeros(1, 9, dtype=torch.long)])
    real = torch.tensor([True] * 9 + [True] * 4 + [False] * 5)
    pad_mask = torch.cat([mask[None, None], torch.eye(9, dtype=torch.bool)[None, None]])
    pad_mask[1, 0, :4, :4] = torch.ones(4, 4, dtype=torch.bool).tril()
    keep = real.nonzero().squeeze(1)
    kept = fast.forward(noisy_model, rows, pos=torch.cat([pos, torch.arange(9)[None]]), mask=pad_mask, keep=keep)
    assert kept.shape == (13, noisy_model.cfg.vocab_size)
    assert torch.allclose(kept[:9], packed[0], atol=1e-5)
    assert torch.allclose(kept[9:], noisy_model(rows[1:, :4])[0][0], atol=ATOL)


def test_keep_and_want_give_the_dense_logits_and_gradients(noisy_model, bmm_t):
    """Right-padded rows under the causal mask, run unpadded (keep), the last block only at `want`: the plain
    forward's logits at those positions, with its gradients."""
    g = torch.Generator().manual_seed(5)
    B, T = 6, 15
    ids = torch.randint(0, 18, (B, T), generator=g)
    lens = torch.tensor([15, 3, 9, 1, 12, 7])
    real = torch.arange(T)[None, :] < lens[:, None]                             # (B, T)
    # each real query sees the real keys up to it; padding sees only itself (every query needs a key)
    mask = (real[:, None, :] & torch.ones(T, T, dtype=torch.bool).tril()) | torch.eye(T, dtype=torch.bool)
    keep = real.view(-1).nonzero().squeeze(1)
    want = torch.randperm(len(keep), generator=g)[:20].sort().values
    pos = torch.arange(T).expand(B, T)
    got = fast.forward(noisy_model, ids, pos=pos, mask=mask[:, None], keep=keep, want=want)
    dense = noisy_model(ids)[0].reshape(B * T, -1)[keep[want]]
    assert got.shape == (20, noisy_model.cfg.vocab_size) and torch.allclose(got, dense, atol=ATOL)
    ga = torch.autograd.grad((got ** 2).sum(), noisy_model.blocks[0].attn.qkv.weight)[0]
    gb = torch.autograd.grad((dense ** 2).sum(), noisy_model.blocks[0].attn.qkv.weight)[0]
    assert ((ga - gb).abs().max() / ga.abs().max()).item() < 1e-5
    every = fast.forward(noisy_model, ids, pos=pos, mask=mask[:, None], keep=keep)    # without want: all N
    assert torch.allclose(every[want], got, atol=1e-5)


def test_loss_and_logits_at_equal_the_forward_ones_with_gradients():
    """fast.loss skips the padding after each row's last counted target and the last block's uncounted queries:
    forward's loss and gradients, up to float rounding; logits_at gives forward's logits at the counted positions."""
    m = build_model(3)
    m.train()
    inp, tgt = split_targets(make_sequences(np.random.default_rng(1), 48, (0.4, 0.3, 0.3)))
    tgt[0] = -100                          # a row with nothing counted runs nowhere
    tgt[1, 12:] = -100                     # a row cut short: its later tokens are not needed
    losses, grads = [], []
    for fn in (lambda: m(inp, tgt)[1], lambda: fast.loss(m, inp, tgt)):
        m.zero_grad()
        loss = fn()
        loss.backward()
        losses.append(loss.detach())
        grads.append([p.grad.clone() for p in m.parameters()])
    assert torch.allclose(losses[0], losses[1], atol=1e-6)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(*grads))
    assert all(g.abs().sum() > 0 for g in grads[1])
    counted = tgt != -100
    with torch.no_grad():
        got, full = fast.logits_at(m, inp, counted), m(inp)[0]
        assert torch.allclose(got, full[counted], atol=1e-5)
        assert torch.allclose(F.cross_entropy(got, tgt[counted]), losses[0], atol=1e-6)


def test_shift_is_the_forward_with_shifted_embeddings(noisy_model):
    """shift (B, T, C) adds to the token embeddings: GPT.forward with the embedding's output shifted (a hook)."""
    ids = torch.randint(0, 18, (4, 13), generator=torch.Generator().manual_seed(6))
    shift = torch.randn(4, 13, noisy_model.cfg.d_model, generator=torch.Generator().manual_seed(7))
    got = fast.forward(noisy_model, ids, shift=shift)
    hook = noisy_model.tok.register_forward_hook(lambda mod, inp, out: out + shift)
    try:
        want, _ = noisy_model(ids)
    finally:
        hook.remove()
    assert torch.allclose(got, want, atol=ATOL)
    assert not torch.allclose(got, noisy_model(ids)[0], atol=1e-2)    # the shift moved them


def test_bad_arguments_are_errors(noisy_model):
    row = torch.zeros(1, 9, dtype=torch.long)
    pos, mask = torch.arange(9)[None], torch.ones(1, 1, 9, 9, dtype=torch.bool).tril()
    bad = [({"keep": torch.arange(3)}, "keep"),                                        # no positions or mask
           ({"keep": torch.arange(3), "pos": pos, "mask": mask.expand(2, 1, 9, 9)}, "keep"),   # a mask for two rows
           ({"keep": torch.arange(3), "pos": pos, "mask": mask, "cache": KVCache(noisy_model.cfg, 1)}, "keep"),
           ({"want": torch.arange(3)}, "want needs keep"),
           ({"shift": torch.zeros(1, 9, 5)}, "shift"),
           ({"shift": torch.zeros(1, 9, 64), "cache": KVCache(noisy_model.cfg, 1)}, "shift"),
           ({"last": True}, "last needs a cache"),
           ({"pos": torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 24]])}, "max_len")]
    for kw, match in bad:
        with pytest.raises(ValueError, match=match):
            fast.forward(noisy_model, row, **kw)
    cache = KVCache(noisy_model.cfg, 1)
    fast.forward(noisy_model, torch.zeros(1, 20, dtype=torch.long), cache=cache)
    for fn in (fast.forward, fast.fill):                                               # 20 cached + 5 > 24
        with pytest.raises(ValueError, match="max_len"):
            fn(noisy_model, torch.zeros(1, 5, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="max_len"):
        fast.loss(noisy_model, torch.zeros(1, 25, dtype=torch.long), torch.zeros(1, 25, dtype=torch.long))
