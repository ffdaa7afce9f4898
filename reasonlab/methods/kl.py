"""Exact KL math over the 18-token vocabulary: the per-position KL in both directions, Schulman's estimators k1 / k2
/ k3 of KL(pi || pi_ref) with their exact mean and variance, the exact expected gradient of each estimator used as a
loss, and sequence-level measures (Rao-Blackwellised sequence KL, the exact Bernoulli lower bound, and the sequence
KL and its gradient by enumerating the outputs).

Per position, a ~ pi, rho(a) = log pi(a) - log pi_ref(a). Summing over a instead of sampling gives, exactly
(Schulman 2020, "Approximating KL divergence"; Tang & Munos 2025, arXiv 2506.09477):
    E[k1] = E[k3] = KL(pi || pi_ref)                          unbiased
    E[grad k1] = sum_a pi(a) grad log pi(a) = 0               k1 as a loss pushes nowhere on average
    E[grad k2] = sum_a pi(a) rho(a) grad log pi(a) = grad KL(pi || pi_ref)
    E[grad k3] = sum_a (pi(a) - pi_ref(a)) grad log pi(a) = grad KL(pi_ref || pi)    the FORWARD KL
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..core.exact import right_probs
from ..core.sampling import EOS, output_logits
from ..train.rl import kl_terms

ESTIMATORS = ("k1", "k2", "k3")


def exact_kl(logits: torch.Tensor, ref_logits: torch.Tensor, forward: bool = False) -> torch.Tensor:
    """(..., V) -> (...): KL(pi || pi_ref) summed over the vocabulary, or KL(pi_ref || pi) with forward=True;
    differentiable in both arguments."""
    lp, ref = F.log_softmax(logits, -1), F.log_softmax(ref_logits, -1)
    if forward:
        return (ref.exp() * (ref - lp)).sum(-1)
    return (lp.exp() * (lp - ref)).sum(-1)


def estimator_table(logits: torch.Tensor, ref_logits: torch.Tensor, est: str) -> torch.Tensor:
    """(..., V): the estimator's value at every token a, as the loss computes it on a sampled one (rl.kl_terms)."""
    lp, ref = F.log_softmax(logits, -1), F.log_softmax(ref_logits, -1)
    return kl_terms(lp, ref, None, None, est)


def moments(logits: torch.Tensor, ref_logits: torch.Tensor, est: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(..., V) -> mean and variance (...) of the estimator under a ~ pi, exact."""
    p = F.softmax(logits, -1)
    k = estimator_table(logits, ref_logits, est)
    mean = (p * k).sum(-1)
    return mean, (p * (k - mean[..., None]) ** 2).sum(-1)


def expected_loss(logits: torch.Tensor, ref_logits: torch.Tensor, est: str) -> torch.Tensor:
    """(..., V) -> (...): sum_a pi(a) k(a) with pi(a) detached. Its gradient is E_{a~pi}[grad k(a)], what the
    sampled loss's gradient averages to (the loss differentiates k at the sample, never the sampling)."""
    return (F.softmax(logits, -1).detach() * estimator_table(logits, ref_logits, est)).sum(-1)


def grad_vector(loss: torch.Tensor, params: list[torch.Tensor]) -> torch.Tensor:
    """The gradient of a scalar as one flat vector (the graph is kept for the next one)."""
    gs = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(gs, params)])


def kl_gradient(logits: torch.Tensor, ref_logits: torch.Tensor, mask: torch.Tensor,
                params: list[torch.Tensor]) -> torch.Tensor:
    """The parameter gradient of the exact reverse KL, mean over the masked positions."""
    m = mask.float()
    return grad_vector((exact_kl(logits, ref_logits) * m).sum() / m.sum(), params)


def gradient_gaps(logits: torch.Tensor, ref_logits: torch.Tensor, mask: torch.Tensor,
                  params: list[torch.Tensor]) -> dict:
    """At the masked positions (mean over them, as a loss would average): the parameter gradient of the exact
    reverse KL, and for each estimator-as-loss, the exact per-token KL as the RL loss computes it (`exact`: the
    KL's own gradient, relative error 0) and the exact forward KL, the relative error ||g - grad KL|| / ||grad KL||
    and the cosine to it."""
    m = mask.float()

    def mean(x):
        return (x * m).sum() / m.sum()

    rev = kl_gradient(logits, ref_logits, mask, params)
    out = {"grad_norm": rev.norm().item()}
    others = {e: mean(expected_loss(logits, ref_logits, e)) for e in ESTIMATORS}
    others["exact"] = mean(kl_terms(None, None, logits, ref_logits, "exact"))
    others["forward"] = mean(exact_kl(logits, ref_logits, forward=True))
    for name, loss in others.items():
        out[name] = versus(grad_vector(loss, params), rev)
    return out


def versus(g: torch.Tensor, exact: torch.Tensor) -> dict:
    """How far gradient g is from the exact one: ||g - exact|| / ||exact||, the cosine, and g's norm."""
    return {"rel_err": ((g - exact).norm() / exact.norm().clamp(min=1e-30)).item(),
            "cos": F.cosine_similarity(g, exact, dim=0).item(), "norm": g.norm().item()}


@torch.no_grad()
def rb_seq_kl(policy, ref, prompts: list[list[int]], outputs: list[list[int]]) -> float:
    """Rao-Blackwellised sequence KL(pi || pi_ref) on outputs sampled from pi: per output the sum over its
    positions of the exact per-position KL, averaged over outputs. Unbiased for the sequence KL (each position's
    sampled log-ratio replaced by its expectation given the prefix), not exact: it averages over samples."""
    lg, _, mask = output_logits(policy, prompts, outputs)
    ref_lg, _, _ = output_logits(ref, prompts, outputs)
    return ((exact_kl(lg.float(), ref_lg.float()) * mask).sum(1)).mean().item()


def p_correct(model, problems: list) -> torch.Tensor:
    """(n,) exact probability that the model writes a correct output: the sum over formats of the teacher-forced
    probability of that format's one correct output (core.exact)."""
    return torch.from_numpy(right_probs(model, problems).sum(1)).float()


def kl_bernoulli(p: torch.Tensor, q: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """kl(p || q) between Bernoulli laws: by data processing, KL(pi || pi_ref) over outputs >= kl(P_pi(E) ||
    P_ref(E)) for any event E, here "the output is correct"."""
    p, q = p.clamp(eps, 1 - eps), q.clamp(eps, 1 - eps)
    return p * (p / q).log() + (1 - p) * ((1 - p) / (1 - q)).log()


# ---------------------------------------------------------------------------------------------------------------
# The sequence KL and its gradient, by enumerating the outputs (Tang & Munos 2025, arXiv 2506.09477).
#
# KL(pi || pi_ref) over whole outputs y is the sum, over every prefix s the policy can write, of pi(s) times the
# per-position KL at s (the chain rule). Its gradient has two parts: pi(s) grad KL_s, which a per-token KL loss on
# sampled prefixes gives, and grad pi(s) KL_s, how a token changes the KL of the positions after it, which it drops.
# k1 put in the reward (REINFORCE on log pi(y) - log pi_ref(y)) keeps both: E[rho(y) grad log pi(y)] is the gradient.

def output_tree(policy, ref, prompts: list[list[int]], eps: float, max_new: int | None = None) -> dict:
    """Every output prefix whose probability under the policy is at least eps, breadth first, with the policy's
    logits at each (differentiable when called with grad) and the reference's; prefixes of equal depth share one
    forward pass. A prefix is expanded (its next-token law read) unless it ended with </s> or holds max_new tokens
    (None: until the model's context is full).

    Returns {"levels": [{"prompt", "logits", "ref", "logp" (log pi(prefix), differentiable), "rho" (log pi - log
    pi_ref of the prefix, detached)}] per depth, "leaves": {"prompt", "logp", "rho"} of the complete outputs of
    probability >= eps, "pruned": (P,) the probability of the outputs left out}."""
    device = next(policy.parameters()).device
    max_new = policy.cfg.max_len - len(prompts[0]) if max_new is None else max_new
    P = len(prompts)
    prompt = torch.arange(P, device=device)
    seqs = torch.tensor(prompts, device=device)
    logp = torch.zeros(P, device=device)
    rho = torch.zeros(P, device=device)
    levels, leaves, pruned = [], {"prompt": [], "logp": [], "rho": []}, torch.zeros(P, device=device)
    for depth in range(max_new):
        lg = policy(seqs)[0][:, -1].float()
        with torch.no_grad():
            rf = ref(seqs)[0][:, -1].float()
        levels.append({"prompt": prompt, "logits": lg, "ref": rf, "logp": logp, "rho": rho})
        lp, lr = F.log_softmax(lg, -1), F.log_softmax(rf, -1)
        child = logp[:, None] + lp                                       # (n, V) log pi of each one-token extension
        keep = child.detach() >= (math.log(eps) if eps > 0 else -math.inf)
        pruned.index_add_(0, prompt, (child.detach().exp() * ~keep).sum(1))
        row, tok = keep.nonzero(as_tuple=True)
        done = (tok == EOS) | (depth + 1 == max_new)
        step_rho = (rho[:, None] + (lp - lr).detach())[row, tok]
        for key, v in (("prompt", prompt[row[done]]), ("logp", child[row[done], tok[done]]), ("rho", step_rho[done])):
            leaves[key].append(v)
        go = ~done
        if not bool(go.any()):
            break
        prompt, logp, rho = prompt[row[go]], child[row[go], tok[go]], step_rho[go]
        seqs = torch.cat([seqs[row[go]], tok[go, None]], 1)
    return {"levels": levels, "leaves": {k: torch.cat(v) for k, v in leaves.items()}, "pruned": pruned}


def sequence_gradients(tree: dict, params: list[torch.Tensor], P: int) -> dict:
    """On an output tree (of P prompts): the sequence KL(pi || pi_ref) summed over the tree's prefixes (mean over
    prompts; exact up to the pruned outputs, which can only add to it) and its gradient, against the expected
    gradient of what RL puts in its loss: the exact per-position KL on the policy's prefixes (what k2's gradient
    averages to), k3 (GRPO), and k1 in the reward (REINFORCE with the KL as a cost, over the complete outputs kept).
    Each: relative error ||g - grad KL|| / ||grad KL||, cosine and norm."""
    lv = tree["levels"]
    kl = torch.cat([exact_kl(x["logits"], x["ref"]) for x in lv])
    w = torch.cat([x["logp"] for x in lv]).exp()                         # pi(prefix), differentiable
    seq = (w * kl).sum() / P
    exact = grad_vector(seq, params)
    losses = {"per_token": (w.detach() * kl).sum() / P,
              "k3": (w.detach() * torch.cat([expected_loss(x["logits"], x["ref"], "k3") for x in lv])).sum() / P,
              "k1_reward": (tree["leaves"]["logp"].detach().exp() * tree["leaves"]["rho"]
                            * tree["leaves"]["logp"]).sum() / P}
    out = {"seq_kl": seq.item(), "pruned": tree["pruned"].mean().item(), "grad_norm": exact.norm().item()}
    for name, loss in losses.items():
        out[name] = versus(grad_vector(loss, params), exact)
    return out
