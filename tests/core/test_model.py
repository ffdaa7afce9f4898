"""The GPT: size, causality, KV-cache parity, determinism."""
import pytest
import torch

from reasonlab.core.model import GPT, KVCache
from reasonlab.train.sft import build_model


def test_size_and_shapes():
    m = build_model(0)
    n = sum(p.numel() for p in m.parameters())
    assert 150_000 < n < 250_000
    logits, loss = m(torch.randint(0, 18, (3, 23)))
    assert logits.shape == (3, 23, 18) and loss is None


def test_same_seed_same_weights():
    a, b, c = build_model(5), build_model(5), build_model(6)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(a.tok.weight, c.tok.weight)


def test_causality(noisy_model):
    """Logits at position t do not depend on tokens after t (and do depend on earlier ones)."""
    x = torch.randint(0, 18, (4, 20))
    y = x.clone()
    y[:, 12:] = torch.randint(0, 18, (4, 8))
    lx, _ = noisy_model(x)
    ly, _ = noisy_model(y)
    assert torch.allclose(lx[:, :12], ly[:, :12], atol=1e-6)
    assert not torch.allclose(lx[:, 12:], ly[:, 12:], atol=1e-3)


def test_causality_by_gradient(noisy_model):
    """nanodo's form: d logits[t] / d embedding[s] is zero exactly when s > t."""
    x = torch.randint(0, 18, (1, 16))
    emb = noisy_model.tok(x).detach().requires_grad_(True)
    h = emb + noisy_model.pos(torch.arange(16))
    for b in noisy_model.blocks:
        h = b(h)
    noisy_model.head(noisy_model.ln_f(h))[0, 7].sum().backward()
    g = emb.grad[0].abs().sum(-1)
    assert (g[8:] == 0).all() and (g[:8] > 0).all()


@pytest.mark.parametrize("decode_rows", [256, 1])
def test_kv_cache_matches_full_forward(noisy_model, decode_rows, monkeypatch):
    """Prefill, a block, then single steps (SDPA below DECODE_ROWS rows, the elementwise attention from it)."""
    from reasonlab.core import model
    monkeypatch.setattr(model, "DECODE_ROWS", decode_rows)
    x = torch.randint(0, 18, (5, 22), generator=torch.Generator().manual_seed(0))   # not the tests-before-it's draw
    full, _ = noisy_model(x)
    cache = KVCache(noisy_model.cfg, 5)
    parts = [noisy_model(x[:, :10], cache=cache)[0]]           # prefill
    parts.append(noisy_model(x[:, 10:13], cache=cache)[0])    # a block of three
    for t in range(13, 22):                                     # then one at a time
        parts.append(noisy_model(x[:, t:t + 1], cache=cache)[0])
    # logits up to ~20: float32 rounding of another summation order reaches 2e-5 on some inputs, and another CPU
    # rounds otherwise; a wrong key or mask moves them by O(1)
    assert torch.allclose(torch.cat(parts, 1), full, atol=1e-4)


@pytest.mark.parametrize("decode_rows", [256, 1])
def test_fill_and_last_write_the_full_cache_and_the_last_logits(noisy_model, decode_rows, monkeypatch):
    """A prefill's shortcuts (the last block stops at its keys and values, or goes on at the last position alone)
    leave the same cache as the plain cached forward, and `last` gives its last logits; decoding goes on alike."""
    from reasonlab.core import model
    monkeypatch.setattr(model, "DECODE_ROWS", decode_rows)
    x = torch.randint(0, 18, (5, 14))
    plain = KVCache(noisy_model.cfg, 5)
    noisy_model(x[:, :4], cache=plain)
    want = noisy_model(x[:, 4:11], cache=plain)[0][:, -1:]
    short = KVCache(noisy_model.cfg, 5)
    assert noisy_model.fill(x[:, :4], short) is None and short.pos == 4
    got = noisy_model(x[:, 4:11], cache=short, last=True)[0]
    assert got.shape == (5, 1, 18) and torch.allclose(got, want, atol=1e-5)
    assert short.pos == plain.pos == 11 and torch.allclose(short.kv[:, :, :11], plain.kv[:, :, :11], atol=1e-6)
    first = KVCache(noisy_model.cfg, 5)                          # `last` on a first block (plainly causal)
    assert torch.allclose(noisy_model(x[:, :11], cache=first, last=True)[0], want, atol=1e-5)
    for t in range(11, 14):
        assert torch.allclose(noisy_model(x[:, t:t + 1], cache=short)[0], noisy_model(x[:, t:t + 1], cache=plain)[0],
                              atol=1e-5)
    with pytest.raises(ValueError, match="last needs a cache"):
        noisy_model(x, last=True)


def test_cache_select_shares_a_prefix(noisy_model):
    """Selecting rows (0, 0, 0, 1, 1, 1) continues each cached prefix three ways, as if each were run in full."""
    x = torch.randint(0, 18, (2, 10))
    cache = KVCache(noisy_model.cfg, 2)
    noisy_model(x, cache=cache)
    rep = cache.select(torch.arange(2).repeat_interleave(3))
    nxt = torch.randint(0, 18, (6, 1))
    got, _ = noisy_model(nxt, cache=rep)
    want, _ = noisy_model(torch.cat([x.repeat_interleave(3, 0), nxt], 1))
    assert torch.allclose(got[:, -1], want[:, -1], atol=1e-5)


def test_too_long_is_an_error():
    with pytest.raises(ValueError, match="max_len"):
        GPT()(torch.zeros(1, 25, dtype=torch.long))
    with pytest.raises(ValueError, match="max_len"):
        GPT()(torch.zeros(1, 3, dtype=torch.long), pos=torch.tensor([[0, 1, 24]]))


def test_a_packed_row_gives_each_sequence_its_own_logits(noisy_model):
    """A shared prefix, then two continuations at the positions they have in their own sequences, with a mask
    that hides each continuation from the other: the logits of running each sequence alone."""
    pre, a, b = [1, 9, 12, 3], [5, 11, 13], [6, 10]
    row = torch.tensor([pre + a + b])
    pos = torch.tensor([list(range(7)) + [4, 5]])
    seg = torch.tensor([0] * 4 + [1] * 3 + [2] * 2)
    mask = ((seg[None, :] == 0) | (seg[None, :] == seg[:, None])) & torch.ones(9, 9, dtype=torch.bool).tril()
    packed, _ = noisy_model(row, pos=pos, mask=mask[None, None])
    alone_a, _ = noisy_model(torch.tensor([pre + a]))
    alone_b, _ = noisy_model(torch.tensor([pre + b]))
    assert torch.allclose(packed[0, :7], alone_a[0], atol=1e-5)
    assert torch.allclose(packed[0, 7:], alone_b[0, 4:], atol=1e-5)
    # padded to two rows, with keep naming the real positions: the same logits, for those positions only
    rows = torch.cat([row, torch.zeros(1, 9, dtype=torch.long)])
    real = torch.tensor([True] * 9 + [True] * 4 + [False] * 5)
    pad_mask = torch.cat([mask[None, None], torch.eye(9, dtype=torch.bool)[None, None]])
    pad_mask[1, 0, :4, :4] = torch.ones(4, 4, dtype=torch.bool).tril()
    kept, _ = noisy_model(rows, pos=torch.cat([pos, torch.arange(9)[None]]), mask=pad_mask, keep=real.nonzero().squeeze(1))
    assert kept.shape == (13, noisy_model.cfg.vocab_size)
    assert torch.allclose(kept[:9], packed[0], atol=1e-5)
    assert torch.allclose(kept[9:], noisy_model(rows[1:, :4])[0][0], atol=1e-5)
    bad = [{},                                                                    # no positions or mask
           {"pos": pos, "mask": mask[None, None].expand(2, 1, 9, 9)},            # a mask for two rows, ids one
           {"pos": pos, "mask": mask[None, None], "cache": KVCache(noisy_model.cfg, 1)}]
    for kw in bad:
        with pytest.raises(ValueError, match="keep"):
            noisy_model(row, keep=torch.arange(3), **kw)


def test_loss_ignores_minus_100():
    m = build_model(0)
    x = torch.randint(0, 18, (2, 8))
    t = torch.full((2, 8), -100)
    t[:, 3] = 5
    _, loss = m(x, t)
    logits, _ = m(x)
    want = torch.nn.functional.cross_entropy(logits[:, 3], torch.tensor([5, 5]))
    assert torch.allclose(loss, want)


def test_training_loss_equals_the_forward_loss_and_gradients():
    """GPT.loss skips the padding after each row's last counted target and the last block's uncounted queries:
    the same loss and gradients as forward's, up to float rounding."""
    import numpy as np

    from reasonlab.train.sft import make_sequences, split_targets
    m = build_model(3)
    m.train()
    inp, tgt = split_targets(make_sequences(np.random.default_rng(1), 48, (0.4, 0.3, 0.3)))
    tgt[0] = -100                          # a row with nothing counted runs nowhere
    tgt[1, 12:] = -100                     # a row cut short: its later tokens are not needed
    losses, grads = [], []
    for fn in (lambda: m(inp, tgt)[1], lambda: m.loss(inp, tgt)):
        m.zero_grad()
        loss = fn()
        loss.backward()
        losses.append(loss.detach())
        grads.append([p.grad.clone() for p in m.parameters()])
    assert torch.allclose(losses[0], losses[1], atol=1e-6)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(*grads))
    assert all(g.abs().sum() > 0 for g in grads[1])
