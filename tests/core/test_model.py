"""The GPT as defined (core/model.py): size, causality, the attention it writes out, the module tree checkpoints
load into, determinism. The fast paths are checked against it in test_fast.py."""
import glob
import os

import pytest
import torch

import reasonlab
from reasonlab.core.model import GPT
from reasonlab.io.checkpoint import load_model
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


def test_attention_is_the_written_out_softmax(noisy_model):
    """Attention.forward (SDPA's fused kernel) equals the textbook form its comment writes out."""
    attn = noisy_model.blocks[1].attn
    x = torch.randn(3, 11, noisy_model.cfg.d_model, generator=torch.Generator().manual_seed(4))
    B, T, C = x.shape
    H = attn.n_heads
    q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in attn.qkv(x).split(C, dim=2))
    att = (q @ k.transpose(-2, -1)) * (C // H) ** -0.5
    att = att.masked_fill(torch.ones(T, T).tril() == 0, float("-inf")).softmax(-1)
    want = attn.proj((att @ v).transpose(1, 2).reshape(B, T, C))
    assert torch.allclose(attn(x), want, atol=1e-5)
    assert (att[:, :, 0, 1:] == 0).all() and (att[:, :, -1] > 0).all()   # the mask bit, and it is not all masked


def test_module_tree_is_the_checkpoints():
    """The parameter names every saved checkpoint uses, and the shipped models load strictly into them."""
    block = [f"{m}.{w}" for m in ("ln1", "attn.qkv", "attn.proj", "ln2", "mlp.0", "mlp.2") for w in ("weight", "bias")]

    def names(n_layers):
        return ({"tok.weight", "pos.weight", "ln_f.weight", "ln_f.bias", "head.weight"}
                | {f"blocks.{i}.{n}" for i in range(n_layers) for n in block})
    assert set(GPT(n_layers=2).state_dict()) == names(2)
    stems = sorted(glob.glob(os.path.join(os.path.dirname(reasonlab.__file__), "models", "*.safetensors")))
    assert len(stems) >= 10
    for stem in stems:
        model, _ = load_model(stem[:-len(".safetensors")])     # strict: every name present, none left over
        assert set(model.state_dict()) == names(model.cfg.n_layers)
