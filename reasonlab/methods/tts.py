"""Test-time compute: think longer (forced formats, s1 budget forcing) or sample more (voting, verifiers, pass@N).

Everything is computed from one pool of N_max samples per problem, subsampled to N = 1, 2, 4, ... (the first N
samples; they are i.i.d.), as search-and-learn draws its curves. Compute is counted as generated tokens. The
`sampling` and `budgets` experiments run these on the base model.
Papers: self-consistency (Wang et al. 2022, arXiv 2203.11171), pass@k estimator (Chen et al. 2021, arXiv
2107.03374), process verifiers (Lightman et al. 2023, arXiv 2305.20050), s1 budget forcing (Muennighoff et al.
2025, arXiv 2501.19393), compute-optimal scaling (Snell et al. 2024, arXiv 2408.03314).
"""
from __future__ import annotations

import numpy as np
import torch

from .. import tasks
from ..core.config import NS
from ..core.model import GPT
from ..core.pool import Pool, sample_pool
from ..core.problems import as_task, part_of
from ..core.sampling import SPECIAL_ID
from ..stats.summary import bootstrap_ci
from ..tasks import Problem, Task


def budget_hook(task: str | Task, max_chain: int | None = None, min_chain: int | None = None):
    """s1-style budget forcing on the chain (the states written after S or T), as a logit hook:
    max_chain: once the chain has that many steps, the answer marker "A" is forced (think at most b steps);
    min_chain: until it has that many, only state words may be written (think at least b steps: s1 suppresses the
    end of thinking; here anything but a state would end or break the chain)."""
    task = as_task(task)
    A, S, T = SPECIAL_ID["A"], SPECIAL_ID["S"], SPECIAL_ID["T"]
    state = torch.zeros(len(task.l1_vocab), dtype=torch.bool)
    state[task.state_ids()] = True

    def hook(logits: torch.Tensor, paths: torch.Tensor) -> torch.Tensor:
        out = paths[:, task.prompt_len:]
        if out.shape[1] == 0:
            return logits
        is_state = state[:logits.shape[1]].to(logits.device)
        thinking = (out[:, 0] == S) | (out[:, 0] == T)
        chain = out[:, 1:]
        open_ = thinking & ~(chain == A).any(1)                       # still writing the chain
        steps = is_state[chain.clamp(max=len(is_state) - 1)].sum(1)
        logits = logits.clone()
        if max_chain is not None:
            cut = open_ & (steps >= max_chain)
            logits[cut] = torch.where(torch.arange(logits.shape[1], device=logits.device) == A, 0.0, float("-inf"))
        if min_chain is not None:
            more = open_ & (steps < min_chain)
            logits[more[:, None] & ~is_state[None, :]] = float("-inf")
        return logits
    return hook


# ---------------------------------------------------------------------------------------------------------------
# Aggregation over the first N samples. Each returns a per-problem score in [0, 1] (mean = accuracy).

def vote(pool: Pool, N: int, weight: np.ndarray | None = None, only: np.ndarray | None = None,
         seed: int = 0) -> np.ndarray:
    """Answer with the most (weighted) votes among the first N samples is right? A tie is broken uniformly at
    random among the tied answers (a seeded generator: the same pool, N and seed give the same picks), so that a
    tie scores its expected value and maj@2 cannot fall below maj@1 on average; breaking ties towards the smallest
    answer would favour problems whose answer happens to be small. `only` restricts the vote to accepted samples;
    problems with none accepted fall back to the plain vote."""
    ans = pool.answer[:, :N]
    cast = ans >= 0                                  # an output without an answer casts no vote
    if only is not None:
        acc = only[:, :N]
        cast &= np.where(acc.any(1, keepdims=True), acc, True)
    w = np.where(cast, np.ones(ans.shape) if weight is None else weight[:, :N], 0.0)
    task = tasks.of(pool.problems)
    truth = pool.truth
    if task.n_answers is not None:   # answers 0..n-1: tally by value
        code, right = np.clip(ans, 0, task.n_answers - 1), truth
    else:                            # a row's distinct answers in order of first appearance
        code, right = np.zeros(ans.shape, dtype=np.int64), np.full(len(ans), -1)
        for i, row in enumerate(ans):
            seen: dict[int, int] = {}
            code[i] = [seen.setdefault(a, len(seen)) for a in row.tolist()]
            right[i] = seen.get(int(truth[i]), -1)
    tally, votes = np.zeros((len(ans), task.n_answers or N)), np.zeros((len(ans), task.n_answers or N))
    at = (np.repeat(np.arange(len(ans)), N), code.ravel())
    np.add.at(tally, at, w.ravel())
    np.add.at(votes, at, cast.ravel())
    given = votes > 0                                # only an answer some output gave can win, whatever its sum
    tally = np.where(given, tally, -np.inf)
    top = tally.max(1, keepdims=True)
    tied = given & np.isclose(tally, top)
    noise = np.random.default_rng([seed, N]).random(tally.shape)     # a random order among the tied answers
    pick = np.where(tied, noise, -1.0).argmax(1)
    return ((pick == right) & given.any(1)).astype(float)


def majority(pool: Pool, N: int) -> np.ndarray:
    """maj@N: self-consistency."""
    return vote(pool, N)


def weighted_vote(pool: Pool, N: int) -> np.ndarray:
    """Votes weighted by each sample's sequence probability."""
    return vote(pool, N, weight=np.exp(pool.logp))


def best_of_n_verified(pool: Pool, N: int) -> np.ndarray:
    """Best-of-N with the rule process verifier: vote among samples whose every chain step checks."""
    return vote(pool, N, only=pool.verified)


def pass_at(c: np.ndarray, n: int, N: int) -> np.ndarray:
    """Unbiased pass@N from c right out of n samples: 1 - C(n - c, N) / C(n, N) = 1 - prod_{j=n-c+1}^{n} (1 - N/j)
    (Chen et al. 2021's stable form), via cumulative sums of log(1 - N/j) over j > N."""
    if not 1 <= N <= n:
        raise ValueError(f"pass@N needs 1 <= N <= n (the samples drawn), got N={N}, n={n}")
    c = np.asarray(c)
    out = np.ones(len(c))
    ok = n - c >= N                                        # otherwise every N-subset holds a right sample
    j = np.arange(N + 1, n + 1)
    C = np.concatenate([np.zeros(N + 1), np.cumsum(np.log1p(-N / j))])   # C[m] = sum_{j=N+1}^{m} log(1 - N/j)
    out[ok] = 1.0 - np.exp(C[n] - C[n - c[ok]])
    return out


def pass_n(pool: Pool, N: int) -> np.ndarray:
    return pass_at(pool.correct.sum(1), pool.n, N)


def verified_pass_n(pool: Pool, N: int) -> np.ndarray:
    """pass@N counting only right answers whose chain checks (direct answers: the answer alone)."""
    ok = pool.correct & (pool.verified | (pool.fmt == 0))
    return pass_at(ok.sum(1), pool.n, N)


METHODS = {"maj": majority, "weighted": weighted_vote, "verifier": best_of_n_verified, "pass": pass_n,
           "verified_pass": verified_pass_n}
SELECTORS = ("maj", "weighted", "verifier")  # methods that pick one answer (pass@N is an oracle: upper bound)


def tokens(pool: Pool, N: int) -> float:
    """Generated tokens per problem for a strategy that draws N samples."""
    return float(pool.length[:, :N].sum(1).mean())


# ---------------------------------------------------------------------------------------------------------------
# Over pools: curves, budget sweeps, the candidate strategies and the compute-optimal frontier.

FORCE = {"A": ["A"], "S": ["S"], "T": ["T"], "free": None}


def curves(pool: Pool, Ns=NS) -> dict:
    """{method: {N: per-problem scores}} for every method and N <= pool.n."""
    return {m: {N: f(pool, N) for N in Ns if N <= pool.n} for m, f in METHODS.items()}


def summarize_scores(x: np.ndarray, seed: int = 0) -> dict:
    """Accuracy (the mean of per-problem scores) and its 95 % bootstrap interval over problems."""
    lo, hi = bootstrap_ci(x, seed=seed)
    return {"acc": float(x.mean()), "lo": lo, "hi": hi}


def budget_sweep(model: GPT, problems: list[Problem], fmt: str, budgets, kind: str = "max") -> list[dict]:
    """Greedy accuracy and thinking tokens with the chain capped at (kind=max) or forced to (kind=min) b steps."""
    task = tasks.of(problems)
    rows = []
    for b in budgets:
        hook = budget_hook(task, max_chain=b) if kind == "max" else budget_hook(task, min_chain=b)
        pool = sample_pool(model, problems, 1, force=FORCE[fmt], temperature=0.0, logit_hook=hook)
        rows.append({"format": fmt, "kind": kind, "budget": b, **summarize_scores(pool.correct[:, 0].astype(float)),
                     "tokens": float(pool.length.mean()), "thinking_tokens": float(pool.chain.mean()),
                     "chain_ok": float(pool.verified.mean())})
    return rows


def candidates(pools: dict[str, Pool], greedy: dict[str, Pool] | None = None, budget: dict[str, Pool] | None = None,
               Ns=NS) -> list[dict]:
    """Every strategy the lab can run, as per-problem scores and tokens on one problem set: each sampled pool's
    selectors at every N (maj@1 is one sample), greedy decoding per format, and greedy with the chain capped at b
    steps (s1's budget forcing, `budget` keyed like "T<=3")."""
    out = []
    for fmt, pool in pools.items():
        for m in SELECTORS:
            for N in Ns:
                if N <= pool.n and (m == "maj" or N > 1):
                    out.append({"format": fmt, "method": m, "N": N, "score": METHODS[m](pool, N),
                                "tokens": pool.length[:, :N].sum(1).astype(float)})
    for kind, extra in (("greedy", greedy or {}), ("budget", budget or {})):
        for name, pool in extra.items():
            out.append({"format": name.split("<")[0], "method": kind if kind == "greedy" else name, "N": 1,
                        "score": pool.correct[:, 0].astype(float), "tokens": pool.length[:, 0].astype(float)})
    return out


def frontier(cands: list[dict], problems: list[Problem], seed: int = 0,
             targets=(0.5, 0.8, 0.9, 0.95, 0.99)) -> dict:
    """Compute-optimal strategy per k (Snell et al.): for each target accuracy, on the validation problems pick,
    for each k, the cheapest candidate that reaches it; on the disjoint test problems (core.problems.part_of) compare its
    tokens with the cheapest single candidate that reaches the target at every k on validation. Every candidate
    competes on both sides, greedy decoding included. The ratio is reported whatever it is (1 when one strategy is
    best everywhere)."""
    split = np.array([part_of(d) for d in problems])
    kk = np.array([d.k for d in problems])
    ks = sorted(set(kk.tolist()))
    name = lambda c: f"{c['format']}/{c['method']}@{c['N']}"   # noqa: E731
    for c in cands:
        for sp in ("val", "test"):
            c[sp] = {k: (float(c["score"][(split == sp) & (kk == k)].mean()), float(c["tokens"][(split == sp) & (kk == k)].mean()))
                     for k in ks}
            c[sp + "_all"] = (float(c["score"][split == sp].mean()), float(c["tokens"][split == sp].mean()))
    out = {"targets": [], "n_val": int((split == "val").sum()), "n_test": int((split == "test").sum())}
    for target in targets:
        chosen = {k: min((c for c in cands if c["val"][k][0] >= target), key=lambda c: c["val"][k][1], default=None)
                  for k in ks}
        fixed = [c for c in cands if min(c["val"][k][0] for k in ks) >= target]
        if None in chosen.values() or not fixed:
            out["targets"].append({"target": target, "reachable": False})
            continue
        best = min(fixed, key=lambda c: c["val_all"][1])
        # the per-k choice scored on test, each k weighted as in the test set
        w = {k: float(((split == "test") & (kk == k)).sum()) for k in ks}
        tot = sum(w.values())
        acc = sum(w[k] * chosen[k]["test"][k][0] for k in ks) / tot
        toks = sum(w[k] * chosen[k]["test"][k][1] for k in ks) / tot
        out["targets"].append({
            "target": target, "reachable": True,
            "adaptive": {"acc": acc, "tokens": toks, "per_k": {k: name(chosen[k]) for k in ks}},
            "fixed": {"acc": best["test_all"][0], "tokens": best["test_all"][1], "strategy": name(best)},
            "ratio": best["test_all"][1] / toks})
    test = split == "test"
    out["points"] = [{"format": c["format"], "method": c["method"], "N": c["N"], "acc": c["test_all"][0],
                      "tokens": c["test_all"][1], "ci": bootstrap_ci(c["score"][test], n_boot=300, seed=seed)}
                     for c in cands]
    return out

