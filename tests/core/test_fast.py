"""The fast paths (core/fast.py) against the plain GPT.forward: decoding with the KV cache, the cache's select and
grow, packed rows (pos, mask, keep), the training loss."""
import numpy as np
import pytest
import torch

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
    assert short.pos == plain.pos == 11 and torch.allclose(short.kv[:, :, :11], plain.kv[:, :, :11], atol=1e-6)
    first = KVCache(noisy_model.cfg, 5)                          # `last` on a first block (plainly causal)
    assert torch.allclose(fast.forward(noisy_model, x[:, :11], cache=first, last=True), want, atol=1e-5)
    for t in range(11, 14):
        assert torch.allclose(fast.forward(noisy_model, x[:, t:t + 1], cache=short),
                              fast.forward(noisy_model, x[:, t:t + 1], cache=plain), atol=1e-5)
    with pytest.raises(ValueError, match="last needs a cache"):
        fast.forward(noisy_model, x, last=True)


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
    bad = [{},                                                                    # no positions or mask
           {"pos": pos, "mask": mask[None, None].expand(2, 1, 9, 9)},            # a mask for two rows, ids one
           {"pos": pos, "mask": mask[None, None], "cache": KVCache(noisy_model.cfg, 1)}]
    for kw in bad:
        with pytest.raises(ValueError, match="keep"):
            fast.forward(noisy_model, row, keep=torch.arange(3), **kw)
    with pytest.raises(ValueError, match="max_len"):
        fast.forward(noisy_model, row[:, :3], pos=torch.tensor([[0, 1, 24]]))


def test_training_loss_equals_the_forward_loss_and_gradients():
    """fast.loss skips the padding after each row's last counted target and the last block's uncounted queries:
    forward's loss and gradients, up to float rounding."""
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
