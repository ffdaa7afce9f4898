"""The exact-KL lesson: its math against the textbook identities, and its claims on hand-made results (hold, fail,
untestable)."""
from dataclasses import asdict

import pytest
import torch
import torch.nn.functional as F

from reasonlab.core.model import GPT
from reasonlab.core.sampling import EOS
from reasonlab.core.task import prompt_ids
from reasonlab.experiments import kl
from reasonlab.methods import kl as M
from reasonlab.stats import findings


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
    assert g["exact"]["rel_err"] < 1e-6 and abs(g["exact"]["cos"] - 1) < 1e-5     # the control: the KL's own gradient


def test_the_bernoulli_bound_is_below_the_kl():
    g = torch.Generator().manual_seed(2)
    p, q = torch.softmax(torch.randn(50, 6, generator=g), -1), torch.softmax(torch.randn(50, 6, generator=g), -1)
    full = (p * (p / q).log()).sum(-1)
    bound = M.kl_bernoulli(p[:, :2].sum(-1), q[:, :2].sum(-1))   # the event "one of the first two outcomes"
    assert (bound <= full + 1e-6).all() and M.kl_bernoulli(torch.tensor(0.3), torch.tensor(0.3)) < 1e-9


def brute_force(policy, ref, prompt, max_new):
    """Every output of at most max_new tokens (ended by </s>, or cut at max_new), by recursion over the vocabulary:
    (log pi(y), log pi_ref(y)) per output."""
    out = []

    def walk(prefix, lp, lr):
        ids = torch.tensor([prompt + prefix])
        a, b = F.log_softmax(policy(ids)[0][0, -1], -1), F.log_softmax(ref(ids)[0][0, -1], -1)
        for t in range(len(a)):
            if t == EOS or len(prefix) + 1 == max_new:
                out.append((lp + a[t], lr + b[t]))
            else:
                walk(prefix + [t], lp + a[t], lr + b[t])
    walk([], 0.0, 0.0)
    return out


def test_the_enumerated_sequence_kl_and_its_gradient_replay_the_definition():
    """All outputs of two tokens of a tiny model, enumerated by recursion: the tree's sequence KL is sum_y pi(y) log
    pi(y) / pi_ref(y), its gradient that sum's, and k1 in the reward follows it (the score-function identity)."""
    torch.manual_seed(0)
    policy, ref = GPT(d_model=16, n_layers=1, n_heads=2), GPT(d_model=16, n_layers=1, n_heads=2)
    prompts = [prompt_ids([1, 2]), prompt_ids([3, 4, 5])]
    params = list(policy.parameters())
    pairs = [brute_force(policy, ref, p, 2) for p in prompts]
    want = sum(lp.exp() * (lp - lr) for ps in pairs for lp, lr in ps) / 2
    g_want = M.grad_vector(want, params)
    tree = M.output_tree(policy, ref, prompts, eps=0.0, max_new=2)
    got = M.sequence_gradients(tree, params, 2)
    assert tree["pruned"].abs().max() < 1e-6 and len(tree["leaves"]["logp"]) == 2 * (1 + 17 * 18)
    assert abs(got["seq_kl"] - want.item()) < 1e-5 and abs(got["grad_norm"] - g_want.norm().item()) < 1e-5
    assert got["k1_reward"]["rel_err"] < 1e-4
    assert got["per_token"]["rel_err"] > 1e-3 and got["k3"]["rel_err"] > 1e-3     # both drop something here
    pruned = M.output_tree(policy, ref, prompts, eps=0.01, max_new=2)
    kept = pruned["leaves"]["logp"].exp()
    assert (kept >= 0.01 - 1e-7).all() and torch.allclose(pruned["pruned"], 1 - torch.zeros(2).index_add_(
        0, pruned["leaves"]["prompt"], kept.detach()), atol=1e-5)                 # left out = 1 - kept


def result(ratios, kls, coss=None, std1=0.2, std3=0.1, drop=2.0, seq_err=0.3, estimator="k3") -> dict:
    """One seed: probes at these per-token KLs where the estimator in the loss has an expected gradient of these
    lengths (the KL's gradient has length 1) and cosines to it; a frontier of two algorithms at two betas whose KL
    falls by the factor `drop` from beta 0 to beta 1; the sequence gradient's relative error of the per-token KL."""
    coss = coss or [1.0] * len(ratios)
    probes = [{"step": 5 * (i + 1), "kl": k, "kl_fwd": k, "k1": {"bias": 0, "std": std1}, "k2": {"bias": 0, "std": 0.1},
               "k3": {"bias": 0, "std": std3},
               "grad": {"grad_norm": 1.0, estimator: {"rel_err": abs(r - 1), "cos": c, "norm": r}}}
              for i, (r, k, c) in enumerate(zip(ratios, kls, coss))]
    frontier = {f"{a}/{b:g}": {"algo": a, "beta": b, "acc": 1, "p_correct": 0.9, "seq_kl": 0.3 / drop ** b,
                               "bound": 0.1} for a in ("grpo", "dapo") for b in (0.0, 1.0)}
    term = lambda e: {"rel_err": e, "cos": 1.0, "norm": 1.0}    # noqa: E731
    seq = {"seq_kl": 0.3, "pruned": 0.003, "grad_norm": 1.0, "first_share": 0.9, "eps": 1e-4, "n_prompts": 21,
           "per_token": term(seq_err), "k3": term(0.5), "k1_reward": term(0.01)}
    return {"probes": probes, "frontier": frontier, "base_p_correct": 0.6, "steps": 40, "probe_beta": 0.04,
            "estimator": estimator, "sequence": seq}


def test_claims_hold_fail_and_are_untestable():
    moved = [result([1.0, 1.3 + 0.01 * s], [0.002, 0.04], coss=[1.0, 0.999]) for s in range(5)]
    fs = findings.gate(kl.claims(moved))
    assert [findings.kind_of(f) for f in fs] == [findings.PREMISE, findings.PRIMARY] + [findings.SECONDARY] * 4
    assert [f["verdict"] for f in fs] == [findings.HOLDS] * 6
    assert abs(fs[1]["value"] - 0.32) < 1e-9 and fs[2]["value"] == 0.999    # the length and the direction apart
    assert fs[1]["control"].startswith("the exact per-token KL") and "k1 in the reward" in fs[5]["control"]
    shorter = [result([1.0, 0.7 - 0.01 * s], [0.002, 0.04]) for s in range(5)]      # off in length the other way
    assert findings.gate(kl.claims(shorter))[1]["verdict"] == findings.HOLDS
    kl.check(moved[0])
    same = [result([1.0, 1.03 + 0.002 * s], [0.002, 0.04], coss=[1.0, 0.95], std1=0.1, std3=0.2 + 0.01 * s,
                   drop=0.5, seq_err=0.005 + 0.001 * s)
            for s in range(5)]   # the lengths agree, the direction does not, k3 is noisier, beta raises the KL, ...
    assert [f["verdict"] for f in findings.gate(kl.claims(same))] == [findings.HOLDS] + [findings.FAILS] * 5
    try:
        kl.check({**moved[0], "sequence": None})
    except ValueError as e:
        assert "sequence" in str(e)
    else:
        raise AssertionError("a kl result without the sequence gradient passed the check")
    still = [result([1.0, 1.0 + 0.001 * s], [0.0, 0.001]) for s in range(5)]   # the run never left the reference
    fs = findings.gate(kl.claims(still))
    assert fs[0]["verdict"] == findings.FAILS and fs[4]["verdict"] == findings.HOLDS   # beta's claim rests on none
    assert all(f["verdict"] == findings.UNTESTABLE and "leaves the reference" in f["untestable"]
               for f in fs[1:4] + fs[5:])


def test_the_placebo_reads_the_controls_gradient_against_a_replicate_and_cannot_hold():
    """With the exact per-token KL in the loss (the placebo), the primary reads the KL's gradient length at the
    probe's prefixes against the same at prefixes sampled apart (its replicate): a spread from sampling alone, under
    the threshold, so it does not hold; without a replicate it is 0 by definition; the room is [0, inf)."""
    cfg = kl.Config()
    pl = kl.placebo(cfg)
    assert pl.estimator == "exact" and pl != cfg
    pl.validate()
    rs = [result([1.0, 1.0], [0.002, 0.04], estimator="exact") for _ in range(5)]
    for s, r in enumerate(rs):
        r["probes"][-1]["replicate"] = {"grad_norm": 1.0 / (1.02 + 0.01 * (s % 3) - 0.02 * (s % 2))}
    fs = kl.claims(rs)
    assert fs[1]["statistic"].startswith("| ||E grad exact|| / ||grad KL at prefixes sampled apart|| - 1 |")
    assert fs[1]["per_seed"] == pytest.approx([abs(1.0 / r["probes"][-1]["replicate"]["grad_norm"] - 1) for r in rs],
                                              abs=1e-6)
    assert len(set(fs[1]["per_seed"])) > 1 and fs[1]["verdict"] == findings.FAILS
    flat = kl.claims([result([1.0, 1.0], [0.002, 0.04], estimator="exact") for _ in range(3)])[1]
    assert flat["per_seed"] == [0.0] * 3 and flat["statistic"].startswith("| ||E grad exact|| / ||grad KL|| - 1 |")
    assert kl.room(cfg) == (0.0, float("inf")) and findings.out_of_room(kl.room(cfg), 0.1) is None


def test_the_replicate_is_the_kls_gradient_at_prefixes_from_a_stream_of_its_own():
    """probe() with a replicate stream: the probe itself is the one without it (the same draws), and the replicate's
    norm is the KL's gradient replayed at the outputs that stream samples; another stream, other prefixes."""
    torch.manual_seed(0)
    policy, ref = GPT(d_model=16, n_layers=1, n_heads=2), GPT(d_model=16, n_layers=1, n_heads=2).eval()
    prompts = [prompt_ids([1, 2, 3]), prompt_ids([4, 5]), prompt_ids([6, 7, 8, 9])]
    gen = lambda s: torch.Generator().manual_seed(s)     # noqa: E731
    plain = kl.probe(policy, ref, prompts, gen(0))
    rec = kl.probe(policy, ref, prompts, gen(0), replicate=gen(5))
    assert {k: v for k, v in rec.items() if k != "replicate"} == plain
    outs = kl.generate_n(policy, prompts, 1, gen(5), 1.0)
    lg, _, mask = kl.output_logits(policy, prompts, outs)
    with torch.no_grad():
        rl = kl.output_logits(ref, prompts, outs)[0]
    m = mask.float()
    loss = (M.exact_kl(lg.float(), rl.float()) * m).sum() / m.sum()
    want = M.grad_vector(loss, list(policy.parameters())).norm().item()
    assert abs(rec["replicate"]["grad_norm"] - want) < 1e-6 * want
    assert rec["replicate"]["grad_norm"] != rec["grad"]["grad_norm"]


def test_the_probed_run_differs_from_the_control_only_in_its_kl_term(monkeypatch):
    """run() trains the probed GRPO run with the configured KL term and every other run with k3: the treatment's and
    the placebo's probed RLConfigs differ in kl_estimator alone."""
    seen = []
    monkeypatch.setattr(kl, "train", lambda policy, ref, rl, callback=None, log=None: seen.append((rl, callback)))
    monkeypatch.setattr(kl, "sequence", lambda *a: {})
    monkeypatch.setattr(kl, "finish", lambda *a: {})
    monkeypatch.setattr(kl.M, "p_correct", lambda model, probs: torch.zeros(len(probs)))
    env = type("Env", (), {"base": lambda self, s, task="digits": GPT(d_model=16, n_layers=1, n_heads=2)})()
    probed = {}
    for est in ("k3", "exact"):
        seen.clear()
        out = kl.run(kl.Config(steps=2, algos=("grpo", "dapo"), betas=(0.0, 0.04), estimator=est, n_probe=2,
                               n_test=2, n_seq=1), 0, env)
        assert out["estimator"] == est
        probed[est] = [asdict(rl) for rl, hook in seen if hook is not None]
        assert len(probed[est]) == 1 and all(rl.kl_estimator == "k3" for rl, hook in seen if hook is None)
        assert all(rl.task == "digits" for rl, _ in seen) and "task" not in out    # digits' keys as they were
    t, c = probed["k3"][0], probed["exact"][0]
    assert {k for k in t if t[k] != c[k]} == {"kl_estimator"}


def test_run_carries_its_task_to_every_run_and_the_page(monkeypatch, tmp_path):
    """On modprod every RL run trains on modprod, the result names its task and the page counts its vocabulary."""
    seen = []
    monkeypatch.setattr(kl, "train", lambda policy, ref, rl, callback=None, log=None: seen.append(rl))
    monkeypatch.setattr(kl, "sequence", lambda *a: {})
    monkeypatch.setattr(kl, "finish", lambda *a: {})
    monkeypatch.setattr(kl.M, "p_correct", lambda model, probs: torch.zeros(len(probs)))
    env = type("Env", (), {"base": lambda self, s, task="digits": GPT(d_model=16, n_layers=1, n_heads=2)})()
    out = kl.run(kl.Config(task="modprod", steps=2, algos=("grpo",), betas=(0.04,), n_probe=1, n_test=1, n_seq=1), 0,
                 env)
    assert [rl.task for rl in seen] == ["modprod"] and out["task"] == "modprod"
    rs = [{**result([0.02, 0.3 + 0.01 * s], [0.002, 0.04]), "task": "modprod"} for s in range(2)]
    [(md, _)] = kl.render(rs, str(tmp_path))
    assert "a sum over the 15-token vocabulary" in md
