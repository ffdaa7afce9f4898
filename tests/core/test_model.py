"""The GPT as defined (core/model.py): size, causality, determinism. The fast paths are checked against it in
test_fast.py."""
import pytest
import torch

from reasonlab.core.model import GPT
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


def test_too_long_is_an_error():
    with pytest.raises(ValueError, match="max_len"):
        GPT()(torch.zeros(1, 25, dtype=torch.long))


def test_loss_ignores_minus_100():
    m = build_model(0)
    x = torch.randint(0, 18, (2, 8))
    t = torch.full((2, 8), -100)
    t[:, 3] = 5
    _, loss = m(x, t)
    logits, _ = m(x)
    want = torch.nn.functional.cross_entropy(logits[:, 3], torch.tensor([5, 5]))
    assert torch.allclose(loss, want)
