"""Does RL only sharpen? pass@N of a weak start and of the GRPO model trained from it, N = 1..256 (Yue et al. 2025,
"Does Reinforcement Learning Really Incentivize Reasoning Capacity in LLMs Beyond the Base Model?", arXiv
2504.13837: RL raises pass@1, but the base model catches up at large N, so RL mostly sharpens what the base could
already sample).

Here pass@N is exact: a sample is counted right only when its whole chain is (an S or T output equal to the one
right output), so p(x) = p_S(x) + p_T(x) comes from teacher forcing (`core.exact`) and pass@N = 1 - (1 - p(x))^N.
Direct answers are left out on purpose: a guesser answers right with 0.1 per sample, 1 - 0.9^N (0.9988 at N = 64),
so answer-only pass@N at large N measures guessing, not reasoning (drawn in the plot as that control).

The start is the erring thinker (digits misread, fixed in its weights), weak at every k. Precondition, checked on
the run: at two values of k or more the start's pass@1 is at most 0.5 and RL raises it by at least 0.2 there (the
"weak" k's every statistic is pooled over); otherwise each claim is untestable and says why.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass

import numpy as np

from ..core.config import NS as POOL_NS
from ..core.exact import pass_exact, right_probs
from ..core.problems import TEST_SEED, problems_per_k
from ..io.report import band, md_table, plt, save
from ..stats import findings
from ..stats.summary import pm
from ..train.rl import RLConfig, train
from ..train.zoo import on_erring, thinker_model
from . import Experiment, register
from .thresholds import THRESHOLDS as TH

NS = POOL_NS + (128, 256)
"""pass@N is exact here (from each problem's probability of a verified chain), so N goes past the pools'."""
NEVER, SOLVES = 1e-3, 1e-2
"""p below NEVER: practically never sampled in 256 tries (expected successes < 0.26); p at least SOLVES: found in
256 tries with probability > 0.92"""
WEAK, RAISE = 0.5, 0.2


@dataclass
class Config:
    steps: int = 100
    """GRPO steps from the start"""
    n: int = 200
    """test problems per k"""
    beta: float = 0.04
    """GRPO's KL weight (Yue et al. train without KL; 0 reproduces that)"""


def run(cfg: Config, seed: int, env) -> dict:
    start = thinker_model("erring", seed, env.cache, env.device)
    policy = copy.deepcopy(start)
    train(policy, copy.deepcopy(start), RLConfig.preset("grpo", steps=cfg.steps, seed=seed, beta=cfg.beta,
                                                        log_every=0), log=None)
    probs = problems_per_k(cfg.n, seed=TEST_SEED + seed, split="test")
    ks = np.array([len(d) for d in probs])
    out = {}
    for name, model in (("start", start), ("rl", policy)):
        p = right_probs(model, probs)
        chain = p[:, 1] + p[:, 2]
        out[name] = {int(k): {"pass": {N: float(pass_exact(chain[ks == k], N).mean()) for N in NS},
                              "direct": float(p[ks == k, 0].mean())} for k in sorted(set(ks))}
        out[name + "_p"] = {int(k): [round(float(v), 6) for v in chain[ks == k]] for k in sorted(set(ks))}
    return out


def weak_ks(r: dict) -> list[int]:
    """The k's where the start is weak (pass@1 <= 0.5) and RL raised pass@1 by >= 0.2."""
    return [k for k in r["start"] if r["start"][k]["pass"][1] <= WEAK + findings.TOL
            and r["rl"][k]["pass"][1] - r["start"][k]["pass"][1] >= RAISE - findings.TOL]


def pooled(r: dict, arm: str, N: int) -> float:
    return float(np.mean([r[arm][k]["pass"][N] for k in weak_ks(r)])) if weak_ks(r) else float("nan")


def coverage(r: dict, gains: bool) -> float:
    """Share of the weak k's problems that RL solves and the start practically never samples (gains), or the
    reverse (losses)."""
    a, b = ("start", "rl") if gains else ("rl", "start")
    pa = np.concatenate([r[a + "_p"][k] for k in weak_ks(r)]) if weak_ks(r) else np.zeros(0)
    pb = np.concatenate([r[b + "_p"][k] for k in weak_ks(r)]) if weak_ks(r) else np.zeros(0)
    return float(np.mean((pa < NEVER) & (pb >= SOLVES))) if len(pa) else float("nan")


def precondition(rs: list[dict]) -> str | None:
    bad = [i for i, r in enumerate(rs) if len(weak_ks(r)) < 2]
    return None if not bad else (f"precondition failed on {len(bad)} of {len(rs)} seeds: the start's pass@1 is not "
                                 f"<= {WEAK} with an RL gain >= {RAISE} at two k's or more")


def claims(rs: list[dict]) -> list[dict]:
    pre = precondition(rs)
    top = NS[-1]
    if pre:
        catch, gains, losses, rl_top = [0.0] * len(rs), [0.0] * len(rs), [0.0] * len(rs), 0.0
    else:
        catch = [pooled(r, "start", top) - pooled(r, "rl", top) for r in rs]
        gains = [coverage(r, True) for r in rs]
        losses = [coverage(r, False) for r in rs]
        rl_top = float(np.mean([pooled(r, "rl", top) for r in rs]))
    sec = "14 pass@k"
    return [findings.seed_check(sec, f"The start catches up with the RL model at N = {top}: its chain-verified pass@{top} "
                         "is higher (RL only sharpens)", f"pass@{top}(start) - pass@{top}(RL), weak k's",
                         catch, TH["passk.catch_up"], untestable=pre, room=1.0 - rl_top, control="the RL model"),
            findings.seed_check(sec, "RL solves problems the start practically never samples (it expands coverage)",
                         f"share of problems with p(start) < {NEVER:g} and p(RL) >= {SOLVES:g}", gains,
                         TH["passk.expands"], untestable=pre),
            findings.seed_check(sec, "RL loses problems the start could sample (coverage shrinks somewhere)",
                         f"share of problems with p(RL) < {NEVER:g} and p(start) >= {SOLVES:g}", losses,
                         TH["passk.shrinks"], untestable=pre)]


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    ax = axes[0]
    for arm, label, c in (("start", "start (erring thinker)", "#4C72B0"), ("rl", "after GRPO", "#C44E52")):
        band(ax, NS, [[pooled(r, arm, N) for N in NS] for r in rs], marker="o", ms=3, color=c, label=label)
    ax.plot(NS, [1 - 0.9 ** N for N in NS], ls="--", color="grey", label="guessing the answer (answer-only control)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N samples")
    ax.set_ylabel("chain-verified pass@N (weak k's)")
    ax.legend(fontsize=8)
    ax = axes[1]
    ks = sorted(rs[0]["start"])
    for arm, c in (("start", "#4C72B0"), ("rl", "#C44E52")):
        for N, ls in ((1, "-"), (NS[-1], ":")):
            ax.plot(ks, [np.mean([r[arm][k]["pass"][N] for r in rs]) for k in ks], ls=ls, marker="o", ms=3, color=c,
                    label=f"{'start' if arm == 'start' else 'GRPO'} pass@{N}")
    ax.set_xlabel("k (digits)")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8)
    save(fig, os.path.join(out, "passk", "pass_at_n.png"))
    fs = claims(rs)
    table = md_table(["N", "start", "after GRPO"], [[N, pm([pooled(r, "start", N) for r in rs]),
                                                     pm([pooled(r, "rl", N) for r in rs])] for N in (1, 4, 16, 64, 256)])
    head = (f"pass@1 {pm([pooled(r, 'start', 1) for r in rs])} -> {pm([pooled(r, 'rl', 1) for r in rs])}; "
            f"pass@256 {pm([pooled(r, 'start', 256) for r in rs])} -> {pm([pooled(r, 'rl', 256) for r in rs])}")
    md = f"""## Does RL only sharpen? pass@N of the start and of the RL model

> **Question.** RL raises the chance that one sample is right. Does it also solve problems the start could never
> sample, or does the start catch up when it may try many times?

![pass@N](passk/pass_at_n.png)

{table}

Exact chain-verified pass@N (teacher-forced probability of the one right S or T output; direct answers are left
out: the dashed line is what guessing them would score), on the k's where the erring thinker is weak and GRPO
lifts pass@1 ({', '.join(str(k) for k in weak_ks(rs[0])) or 'none'} on seed 0); mean ± std over seeds.
{" ".join(findings.verdict_line(f) for f in fs)}

*Paper:* Yue et al. 2025, "Does Reinforcement Learning Really Incentivize Reasoning Capacity in LLMs Beyond the
Base Model?" (arXiv 2504.13837); pass@N as in Chen et al. 2021 (arXiv 2107.03374), here exact.
*Explore:* `reasonlab lab --only passk`; `core.exact.right_probs(model, problems)` gives each format's p(x).
"""
    return [(md, head)]


def check(result) -> None:
    for arm in ("start", "rl"):
        if arm not in result or arm + "_p" not in result or any("pass" not in v for v in result[arm].values()):
            raise ValueError("a passk result needs start and rl, each with pass@N per k and p per problem")


register(Experiment("passk", Config, run, claims, render, depends=on_erring(), check=check, takes_checkpoint=False,
                    quick=Config(steps=4, n=10), run_cost=12,
                    render_cost=0.5, tier="lesson"))
