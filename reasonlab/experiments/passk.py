"""Does RL only sharpen? pass@N of a weak start and of the GRPO model trained from it, N = 1..256 (Yue et al. 2025,
"Does Reinforcement Learning Really Incentivize Reasoning Capacity in LLMs Beyond the Base Model?", arXiv
2504.13837: RL raises pass@1, but the base model catches up at large N, so RL mostly sharpens what the base could
already sample; ProRL, arXiv 2505.24864: prolonged RL solves problems where the base's pass@k is 0).

Here pass@N is exact: a sample is counted right only when its whole chain is (an S or T output equal to the one
right output), so p(x) = p_S(x) + p_T(x) comes from teacher forcing (`core.exact`) and pass@N = 1 - (1 - p(x))^N.
Direct answers are left out on purpose: a guesser answers right with the task's chance per sample (digits: 0.1, so
1 - 0.9^N, 0.9988 at N = 64), so answer-only pass@N at large N measures guessing, not reasoning (drawn in the plot as
that control).

The start is the erring thinker (its task's words misread, fixed in its weights). Over whole k's its pass@256 is near 1:
no room for RL to show anything there. So the primary reads the problems where the start has room by the design:
those it practically never samples (p < NEVER, so its pass@N there is at most 1 - (1 - NEVER)^N, 0.23 at N = 256),
chosen on the start's exact p alone, never on RL's. Raising pass@1 alone lifts them too: pure sharpening (every
problem's odds of a right chain multiplied by one constant, set per seed so that the mean p equals RL's) takes
pass@256 there far above the start's (docs/findings_moved.md has the figure). So the control is that sharpened
start, the prediction of "RL only sharpens"; the claim is that RL's pass@N there exceeds it. Premise, checked on the run: every seed has at least
MIN_OUT such problems. The placebo trains RL the same way on a reward that carries no information (1 with probability
0.5 whatever the output: Shao et al. 2025's random reward, `core.rewards.random_reward`): its RL arm moves (GRPO's
clipping alone sharpens the start's likely outputs, and any movement lifts problems chosen for being at the bottom),
so its statistic has a spread, and it must not beat the sharpened start.
"""
from __future__ import annotations

import copy
import math
import os
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from .. import tasks
from ..core.config import NS as POOL_NS
from ..core.config import Count, NonNegative, NTest, Steps0
from ..core.exact import pass_exact, right_probs
from ..core.problems import test_problems
from ..core.rewards import random_reward
from ..io.report import band, md_table, plt, save
from ..stats import findings
from ..stats.summary import pm
from ..train.rl import RLConfig, train
from ..train.zoo import on_erring, thinker_model
from . import Experiment, opening, reading, register, replicate_seed, reused
from .thresholds import THRESHOLDS as TH

NS = POOL_NS + (128, 256)
"""pass@N is exact here (from each problem's probability of a verified chain), so N goes past the pools'."""
NEVER, SOLVES = 1e-3, 1e-2
"""p below NEVER: practically never sampled in 256 tries (expected successes < 0.26); p at least SOLVES: found in
256 tries with probability > 0.92"""
SECTION = "passk"
MIN_OUT = int(TH["passk.room"].value)
"""problems per seed out of the start's reach that the primary needs (fewer: one or two problems decide a seed)"""


@dataclass
class Config:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    rl_steps: Steps0 = 100
    """GRPO steps from the start (0: the RL arm is the start)"""
    reward: Literal["rule", "random"] = "rule"
    """the RL arm's reward: the rule reward, or a random one that reads nothing (1 with probability 0.5: Shao et al.
    2025; the placebo)"""
    n_test: NTest = 200
    """test problems per k (the seed's own test draw)"""
    beta: NonNegative = 0.04
    """GRPO's KL weight (Yue et al. train without KL; 0 reproduces that)"""
    pass_n: Count = 256
    """N of the primary's pass@N (one of NS)"""

    def validate(self) -> None:
        if self.pass_n not in NS:
            raise ValueError(f"passk: pass_n must be one of {', '.join(map(str, NS))}, got {self.pass_n}")


def run(cfg: Config, seed: int, env) -> dict:
    spec = tasks.get(cfg.task).spec
    start = thinker_model("erring", seed, env.cache, env.device, task=cfg.task)
    policy = copy.deepcopy(start)
    if cfg.rl_steps:
        reward = random_reward(replicate_seed(seed, "passk/random-reward")) if cfg.reward == "random" else None
        train(policy, copy.deepcopy(start), RLConfig.preset("grpo", steps=cfg.rl_steps, seed=seed, beta=cfg.beta,
                                                            log_every=0, task=cfg.task), reward_fn=reward, log=None)
    probs = test_problems(cfg.n_test, "passk", seed, task=cfg.task)
    ks = np.array([p.k for p in probs])
    out = {"steps": cfg.rl_steps, "pass_n": cfg.pass_n, "reward": cfg.reward,
           **({} if spec == "digits" else {"task": spec})}
    for name, model in (("start", start), ("rl", policy)):
        p = right_probs(model, probs)
        chain = p[:, 1] + p[:, 2]
        out[name] = {int(k): {"pass": {N: float(pass_exact(chain[ks == k], N).mean()) for N in NS},
                              "direct": float(p[ks == k, 0].mean())} for k in sorted(set(ks))}
        out[name + "_p"] = {int(k): [round(float(v), 8) for v in chain[ks == k]] for k in sorted(set(ks))}
    return out


def probs_of(r: dict, arm: str) -> np.ndarray:
    """Every test problem's p (the probability of a right chain) under one arm, k by k."""
    return np.concatenate([np.asarray(r[arm + "_p"][k], dtype=float) for k in r[arm + "_p"]])


def pooled(r: dict, arm: str, N: int) -> float:
    """pass@N over the whole test draw (every k, weighted by its problems)."""
    return float(pass_exact(probs_of(r, arm), N).mean())


def out_of_reach(r: dict) -> np.ndarray:
    """The problems the start practically never samples (p < NEVER): chosen on the start alone."""
    return probs_of(r, "start") < NEVER


@reused
def sharpened(r: dict) -> np.ndarray:
    """The start sharpened to RL's pass@1: every test problem's p with its odds multiplied by one constant c, found
    by bisection on log c so that the mean p over the seed's test draw equals RL's (what RL would give if it only
    sharpened the start's distribution)."""
    p, target = probs_of(r, "start"), float(probs_of(r, "rl").mean())
    lo, hi = -50.0, 50.0
    for _ in range(200):
        mid = (lo + hi) / 2
        c = math.exp(mid)
        lo, hi = (mid, hi) if float((c * p / (c * p + 1 - p)).mean()) < target else (lo, mid)
    c = math.exp((lo + hi) / 2)
    return c * p / (c * p + 1 - p)


def beyond_sharpening(r: dict, N: int) -> float:
    """pass@N(RL) - pass@N(the sharpened start) on the problems out of the start's reach (nan where none)."""
    sel = out_of_reach(r)
    if not sel.any():
        return math.nan
    return float(pass_exact(probs_of(r, "rl")[sel], N).mean() - pass_exact(sharpened(r)[sel], N).mean())


def room(cfg: Config) -> tuple[float, float]:
    """The primary's range by the design: a difference of two pass@N on the same problems."""
    return -1.0, 1.0


def placebo(cfg: Config) -> Config:
    """RL as the treatment runs it, on a random reward: the procedure without the reward's information."""
    return replace(cfg, reward="random")


def losses(r: dict) -> float:
    """Share of the test draw the start could sample (p >= SOLVES) and RL practically never does (p < NEVER)."""
    return float(np.mean((probs_of(r, "rl") < NEVER) & (probs_of(r, "start") >= SOLVES)))


def every_seed(rs: list[dict]) -> dict:
    """The premise: every seed's test draw has at least MIN_OUT problems the start practically never samples (the
    fewest over the seeds against MIN_OUT; a count, so no interval)."""
    count = [int(out_of_reach(r).sum()) for r in rs]
    return findings.finding(
        SECTION, f"Every seed's test draw has at least {MIN_OUT} problems the start practically never samples "
        f"(p < {NEVER:g}): room for RL to reach them", f"problems with p(start) < {NEVER:g}, the fewest over the seeds",
        min(count), (min(count), min(count)), count, f">= {MIN_OUT}",
        findings.HOLDS if min(count) >= MIN_OUT else findings.FAILS, source=TH["passk.room"].source)


def primary_claim(rs: list[dict], N: int) -> dict:
    """RL against the start sharpened to RL's pass@1, on the problems out of the start's reach; the negative
    control of the statistic it replaced (the sharpened start against the start, which "RL expands" used to read)
    rides along, judged alike."""
    none = None if all(out_of_reach(r).any() for r in rs) else "a seed has no problem out of the start's reach"
    claim = (f"RL reaches beyond sharpening: on the problems the start practically never samples, RL's chain-verified "
             f"pass@{N} exceeds that of the start sharpened to RL's pass@1 (every problem's odds of a right chain "
             "raised by one constant per seed: the prediction of 'RL only sharpens')")
    stat = f"pass@{N}(RL) - pass@{N}(sharpened start), problems with p(start) < {NEVER:g}"
    control = "the start sharpened to RL's pass@1 (its odds times one constant per seed)"
    if none:
        return findings.unread(SECTION, claim, stat, TH["passk.expands"], none, control=control, requires=["room"])
    sharp = [reach_of(sharpened(r), r, N) - reach(r, "start", N) for r in rs]
    return findings.seed_check(SECTION, claim, stat, [beyond_sharpening(r, N) for r in rs], TH["passk.expands"],
                               control=control, requires=["room"],
                               sharpening=findings.negative(
                                   "pure sharpening against the start (what \"RL reaches beyond the start\" would "
                                   "have counted as reach: why the control is the sharpened start)",
                                   f"pass@{N}(sharpened start) - pass@{N}(start), the same problems", sharp,
                                   TH["passk.expands"]))


def reach_of(p: np.ndarray, r: dict, N: int) -> float:
    """pass@N of the probabilities p on the problems out of the start's reach."""
    return float(pass_exact(p[out_of_reach(r)], N).mean())


def claims(rs: list[dict]) -> list[dict]:
    N = rs[0].get("pass_n", NS[-1])
    return [
        findings.premise(every_seed(rs), "room"),
        findings.primary(primary_claim(rs, N)),
        findings.seed_check(SECTION, f"The start catches up with the RL model at N = {N} over the whole test draw: its "
                            f"chain-verified pass@{N} is higher (Yue et al.: RL only sharpens)",
                            f"pass@{N}(start) - pass@{N}(RL), every k", [pooled(r, "start", N) - pooled(r, "rl", N)
                                                                       for r in rs], TH["passk.catch_up"],
                            control="the RL model", requires=[]),
        findings.seed_check(SECTION, "RL loses problems the start could sample (coverage shrinks somewhere)",
                            f"share of the test draw with p(RL) < {NEVER:g} and p(start) >= {SOLVES:g}",
                            [losses(r) for r in rs], TH["passk.shrinks"], requires=[])]


def reach(r: dict, arm: str, N: int) -> float:
    """pass@N of one arm on the problems out of the start's reach (nan where there are none)."""
    sel = out_of_reach(r)
    return float(pass_exact(probs_of(r, arm)[sel], N).mean()) if sel.any() else float("nan")


def pm_seeds(xs) -> str:
    """mean ± std over the seeds that have a value ("—" where none has)."""
    xs = [x for x in xs if np.isfinite(x)]
    return pm(xs) if xs else "—"


def guessing(r: dict, N: int) -> float:
    """pass@N of a guesser that answers right with the task's chance at each k (`Task.chance`) per sample, over one
    seed's test draw (every k weighted by its problems)."""
    spec = r.get("task", "digits")
    c = np.concatenate([np.full(len(r["start_p"][k]), tasks.get(spec).chance(int(k))) for k in r["start_p"]])
    return float(np.mean(1 - (1 - c) ** N))


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    ax = axes[0]
    for arm, label, c in (("start", "start (erring thinker)", "#4C72B0"), ("rl", "after GRPO", "#C44E52")):
        band(ax, NS, [[pooled(r, arm, N) for N in NS] for r in rs], marker="o", ms=3, color=c, label=f"{label}, every k")
        ys = [[reach(r, arm, N) for r in rs if out_of_reach(r).any()] for N in NS]
        if ys[0]:
            ax.plot(NS, [np.mean(y) for y in ys], ls=":", marker="x", ms=3, color=c,
                    label=f"{label}, problems with p(start) < {NEVER:g}")
    ax.plot(NS, [guessing(rs[0], N) for N in NS], ls="--", color="grey",
            label="guessing the answer (answer-only control)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N samples")
    ax.set_ylabel("chain-verified pass@N")
    ax.legend(fontsize=7)
    ax = axes[1]
    ks = sorted(rs[0]["start"])
    for arm, c in (("start", "#4C72B0"), ("rl", "#C44E52")):
        for N, ls in ((1, "-"), (NS[-1], ":")):
            ax.plot(ks, [np.mean([r[arm][k]["pass"][N] for r in rs]) for k in ks], ls=ls, marker="o", ms=3, color=c,
                    label=f"{'start' if arm == 'start' else 'GRPO'} pass@{N}")
    ax.set_xlabel("k (problem size)")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8)
    save(fig, os.path.join(out, "passk", "pass_at_n.png"))
    fs = findings.gate(claims(rs))
    sharp = lambda r, N: reach_of(sharpened(r), r, N) if out_of_reach(r).any() else math.nan   # noqa: E731
    table = md_table(["N", "start, every k", "after GRPO, every k", f"start, p(start) < {NEVER:g}",
                      f"after GRPO, p(start) < {NEVER:g}", f"the start sharpened, p(start) < {NEVER:g}"],
                     [[N, *(pm_seeds([f(r, arm, N) for r in rs]) for f, arm in ((pooled, "start"), (pooled, "rl"),
                                                                           (reach, "start"), (reach, "rl"))),
                       pm_seeds([sharp(r, N) for r in rs])] for N in (1, 4, 16, 64, 256)])
    count = [int(out_of_reach(r).sum()) for r in rs]
    head = (f"pass@256 on the problems the start never samples: {pm_seeds([reach(r, 'start', 256) for r in rs])} -> "
            f"{pm_seeds([reach(r, 'rl', 256) for r in rs])}; every k: {pm([pooled(r, 'start', 256) for r in rs])} -> "
            f"{pm([pooled(r, 'rl', 256) for r in rs])}")
    md = f"""## Does RL only sharpen? pass@N of the start and of the RL model

{opening("passk")}

![pass@N](passk/pass_at_n.png)

{table}

Exact chain-verified pass@N (teacher-forced probability of the one right S or T output; direct answers are left
out: the dashed line is what guessing them would score) of the erring thinker and of GRPO from it ({rs[0].get('steps',
'')} steps), on each seed's test draw, and on the problems of that draw the start practically never samples (p <
{NEVER:g}: {', '.join(map(str, count))} per seed, chosen on the start alone); mean ± std over seeds. The last column is
the control: the start with every problem's odds of a right chain multiplied by one constant per seed, so that its
mean p equals RL's, what RL would give if it only sharpened; it lifts the problems out of reach too, so RL's gain over
the start there does not by itself show that RL reaches beyond sharpening.
{" ".join(findings.verdict_line(f) for f in fs)}

{reading("passk")}
"""
    return [(md, head)]


def check(result) -> None:
    for arm in ("start", "rl"):
        if arm not in result or arm + "_p" not in result or any("pass" not in v for v in result[arm].values()):
            raise ValueError("a passk result needs start and rl, each with pass@N per k and p per problem")


QUESTION = """RL raises the chance that one sample is right. Does it also solve problems the start could never
sample, or does the start catch up when it may try many times?"""
PAPERS = """Yue et al. 2025, "Does Reinforcement Learning Really Incentivize Reasoning Capacity in LLMs Beyond the
Base Model?" (arXiv 2504.13837); ProRL (arXiv 2505.24864); pass@N as in Chen et al. 2021 (arXiv 2107.03374), here
exact."""
EXPLORE = """`reasonlab lab --only passk`; `core.exact.right_probs(model, problems)` gives each format's p(x)."""

register(Experiment("passk", Config, run, claims, render, question=QUESTION, papers=PAPERS, explore=EXPLORE,
                    depends=on_erring(), check=check, takes_checkpoint=False,
                    quick=Config(rl_steps=4, n_test=10), run_cost=7, render_cost=0.5, tier="lesson", room=room,
                    placebo=placebo, negative="the start sharpened to RL's pass@1 in RL's place: 0 by definition "
                    "(against the unsharpened start it passes: the primary's `sharpening` detail)"))
