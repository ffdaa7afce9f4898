"""The exact-KL lesson: its math against the textbook identities, and its claims on hand-made results (hold, fail,
untestable)."""
import torch

from reasonlab.experiments import kl
from reasonlab.methods import kl as M
from reasonlab.stats import findings as F


def softmaxes(seed: int = 0, n: int = 4, V: int = 18):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, V, generator=g).requires_grad_(True)
    return logits, torch.randn(n, V, generator=g) * 2


def grad(loss, x):
    return torch.autograd.grad(loss, x, retain_graph=True)[0]


def test_the_expected_gradients_replay_schulman_and_tang_munos():
    """sum_a pi(a) grad k(a), one sampled token at a time, against the identities: k1 -> 0, k2 -> grad KL(pi||ref),
    k3 -> grad KL(ref||pi); and expected_loss gives the same."""
    logits, ref = softmaxes()
    pi = torch.softmax(logits, -1).detach()
    lp, ref_lp = torch.log_softmax(logits, -1), torch.log_softmax(ref, -1)
    by_hand = {}
    for est in M.ESTIMATORS:
        total = torch.zeros_like(logits)
        for a in range(logits.shape[1]):      # the loss on "token a sampled", weighted by its probability
            k = M.kl_terms(lp[:, a], ref_lp[:, a], None, None, est)
            total += pi[:, a:a + 1] * grad(k.sum(), logits)
        by_hand[est] = total
        assert torch.allclose(grad(M.expected_loss(logits, ref, est).sum(), logits), total, atol=1e-6)
    rev, fwd = grad(M.exact_kl(logits, ref).sum(), logits), grad(M.exact_kl(logits, ref, forward=True).sum(), logits)
    assert by_hand["k1"].abs().max() < 1e-6
    assert torch.allclose(by_hand["k2"], rev, atol=1e-6)
    assert torch.allclose(by_hand["k3"], fwd, atol=1e-6)
    assert (rev - fwd).abs().max() > 1e-2                  # the two KLs' gradients differ away from the reference


def test_k1_and_k3_are_unbiased_and_k2_is_not():
    logits, ref = softmaxes(1)
    true = M.exact_kl(logits, ref)
    for est in ("k1", "k3"):
        assert torch.allclose(M.moments(logits, ref, est)[0], true, atol=1e-5)
    assert (M.moments(logits, ref, "k2")[0] - true).abs().max() > 1e-3
    assert (M.moments(logits, ref, "k1")[1] > 0).all()


def test_gradient_gaps_in_parameter_space():
    torch.manual_seed(0)
    layer = torch.nn.Linear(5, 18)
    x, ref = torch.randn(3, 4, 5), torch.randn(3, 4, 18)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[0, 2:] = False
    g = M.gradient_gaps(layer(x), ref, mask, list(layer.parameters()))
    assert abs(g["k1"]["rel_err"] - 1) < 1e-5 and g["k2"]["rel_err"] < 1e-5
    assert abs(g["k3"]["rel_err"] - g["forward"]["rel_err"]) < 1e-5 and g["k3"]["rel_err"] > 0.01


def test_the_bernoulli_bound_is_below_the_kl():
    g = torch.Generator().manual_seed(2)
    p, q = torch.softmax(torch.randn(50, 6, generator=g), -1), torch.softmax(torch.randn(50, 6, generator=g), -1)
    full = (p * (p / q).log()).sum(-1)
    bound = M.kl_bernoulli(p[:, :2].sum(-1), q[:, :2].sum(-1))   # the event "one of the first two outcomes"
    assert (bound <= full + 1e-6).all() and M.kl_bernoulli(torch.tensor(0.3), torch.tensor(0.3)) < 1e-9


def result(errs, kls, std1=0.2, std3=0.1, drop=2.0) -> dict:
    """One seed: probes with these k3 relative errors and per-token KLs; a frontier of two algorithms at two betas
    whose KL falls by the factor `drop` from beta 0 to beta 1."""
    probes = [{"step": 5 * (i + 1), "kl": k, "kl_fwd": k, "k1": {"bias": 0, "std": std1}, "k2": {"bias": 0, "std": 0.1},
               "k3": {"bias": 0, "std": std3}, "grad": {"grad_norm": 1.0, "k3": {"rel_err": e, "cos": 1, "norm": 1}}}
              for i, (e, k) in enumerate(zip(errs, kls))]
    frontier = {f"{a}/{b:g}": {"algo": a, "beta": b, "acc": 1, "p_correct": 0.9, "seq_kl": 0.3 / drop ** b,
                               "bound": 0.1} for a in ("grpo", "dapo") for b in (0.0, 1.0)}
    return {"probes": probes, "frontier": frontier, "base_p_correct": 0.6, "steps": 40, "probe_beta": 0.04}


def test_claims_hold_fail_and_are_untestable():
    moved = [result([0.02, 0.3 + 0.01 * s], [0.002, 0.04]) for s in range(5)]
    fs = kl.claims(moved)
    assert [f["verdict"] for f in fs] == [F.HOLDS] * 4
    kl.check(moved[0])
    same = [result([0.05 + 0.001 * s, 0.03 + 0.002 * s], [0.002, 0.04], std1=0.1, std3=0.2 + 0.01 * s, drop=0.5)
            for s in range(5)]                         # the gradients agree, k3 is noisier, beta raises the KL
    assert [f["verdict"] for f in kl.claims(same)] == [F.FAILS] * 4
    still = [result([0.0, 0.001 * s], [0.0, 0.001]) for s in range(5)]   # the run never left the reference
    fs = kl.claims(still)
    assert all(f["verdict"] == F.UNTESTABLE and "precondition" in f["untestable"] for f in fs[:3])
