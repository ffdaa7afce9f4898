"""Entropy collapse: the exact policy entropy along RL runs of GRPO, GRPO with DAPO's clip-higher (Yu et al. 2025,
arXiv 2503.14476: the upper clip at 1 + 0.28 instead of 1 + 0.2, so that rare tokens with a positive advantage can
grow) and GRPO with an entropy bonus (Cui et al. 2025, "The Entropy Mechanism of RL for Reasoning LMs", arXiv
2505.22617: entropy collapses early, and a bonus of 5e-3 was stable but no better).

The task has one right output per format, so the entropy that matters is the format choice (A, S or T at "="):
content entropy should reach zero. Every few steps the policy is probed exactly, by teacher forcing on held-out
problems: the entropy of the format token, the entropy at the chain states and at the answer of each format's correct
solution (per role: a token mean would move with the format mix, since T is longer), and greedy accuracy; each
step's share of groups whose rewards all agree (`frac_reward_zero_std`, no learning signal) comes from the run.

The start is the erring thinker: its chains err (so accuracy has room and content entropy something to lose) and it
spreads its format choice over A, S and T. The base model's chains are right already, so its content entropy starts
near zero and its accuracy near the ceiling, which would leave the claims no room. The runs drop the KL penalty (as
both papers do) and take a larger step than the lab's default, so the format entropy collapses within the run
rather than after it.

The primary: clip-higher against GRPO, which differ only in the upper clip (epsilon_high 0.28 against 0.2: the
placebo sets it to 0.2, and that arm is then GRPO run again on training and sampling streams of its own).
Premises, checked on the run: the start's format entropy is above half a nat and GRPO lowers it (else there is no
collapse to prevent); the accuracy and step claims also need GRPO to leave accuracy below 1 and to not be solved at
its first probe.
"""
from __future__ import annotations

import copy
import math
import os
import time
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import torch

from .. import tasks
from ..core.config import Count, Every, NonNegative, Positive, Steps
from ..core.evaluate import evaluate
from ..core.problems import test_problems
from ..core.sampling import SPECIAL_ID, output_logits
from ..io.report import band, md_table, plt, save
from ..stats import findings
from ..stats.summary import pm
from ..tasks import FORMATS
from ..train.rl import RLConfig, entropy, every_n_steps, train
from ..train.zoo import get_erring_model, on_erring
from . import Experiment, opening, reading, register, replicate_seed
from .thresholds import THRESHOLDS as TH

ARMS = {"grpo": "GRPO", "clip_higher": "GRPO + clip-higher", "bonus": "GRPO + entropy bonus"}
START_NAME = {"erring": "erring thinker", "base": "base model"}
COLORS = {"grpo": "#4C72B0", "clip_higher": "#DD8452", "bonus": "#55A868"}


@dataclass
class Config:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    start: Literal["erring", "base"] = "erring"
    """the model every run starts from: the erring thinker or the base model"""
    steps: Steps = 80
    """RL steps per run (the same for every arm)"""
    eval_every: Every = 5
    """probe the policy every N steps"""
    n_probe: Count = 50
    """test problems per k in the probe set (the seed's own test draw)"""
    learning_rate: Positive = 3e-4
    """Adam rate of every arm (above the lab's RL default, so that the format mix moves within the run)"""
    num_iterations: Count = 4
    """updates per batch of samples, so that the ratio leaves 1 and the clip can bite"""
    epsilon_high: Positive = 0.28
    """clip-higher's upper clip (DAPO's value; GRPO's is epsilon = 0.2: the placebo)"""
    entropy_coef: NonNegative = 5e-3
    """the entropy bonus arm's coefficient (Cui et al.'s stable value)"""

    def validate(self) -> None:
        if self.eval_every < 1 or self.steps % self.eval_every:
            raise ValueError(f"steps ({self.steps}) must be a multiple of eval_every ({self.eval_every}): the last "
                             "probe is the run's end")


@torch.no_grad()
def probe(model, probs: list) -> dict:
    """Exact entropies on teacher-forced correct solutions: the format token at "=", and per format the chain states
    and the answer (its words' mean, where it has several); with the mean format probabilities and greedy accuracy."""
    probs = tasks.problems_of(probs)
    task = tasks.of(probs)
    out = {"roles": {}}
    prompts = [task.prompt_ids(p) for p in probs]
    size = torch.tensor([task.answer_len(p.k) for p in probs])    # answer words per problem
    for name in FORMATS:
        outs = [[task.id[w] for w in task.solution(p, name)] for p in probs]
        logits, _, mask = output_logits(model, prompts, outs)
        h, n = entropy(logits), mask.sum(1)
        if name == "direct":   # the format token's distribution is the same under every format's forcing
            out["format_H"] = h[:, 0].mean().item()
            p = torch.softmax(logits[:, 0], -1)
            out["p_format"] = {f: p[:, SPECIAL_ID[t]].mean().item() for f, t in FORMATS.items()}
        end = (n - 1).tolist()                                     # "</s>": the answer's words sit just before it
        first = (n - 1 - size.to(n.device)).tolist()               # after "A"
        role = {"answer": torch.stack([h[i, a:b].mean() for i, (a, b) in enumerate(zip(first, end))]).mean().item()}
        if name != "direct":                                       # positions 1 .. before "A": the chain's states
            role["chain"] = float(np.mean([h[i, 1:first[i] - 1].mean().item() for i in range(len(probs))]))
        out["roles"][name] = role
    out["acc"] = evaluate(model, probs)["acc"]
    return out


def arm_config(arm: str, cfg: Config, seed: int) -> RLConfig:
    """GRPO with the experiment's rate and updates, no KL; clip-higher and the bonus change one field each (a
    clip-higher at GRPO's own clip is the placebo's second GRPO run, its seed `replicate_seed`'s)."""
    extra = {"clip_higher": {"epsilon_high": cfg.epsilon_high}, "bonus": {"entropy_coef": cfg.entropy_coef}}
    if arm == "clip_higher" and cfg.epsilon_high == RLConfig.preset("grpo").epsilon:
        seed = replicate_seed(seed)           # the placebo: GRPO once more, on training and sampling streams of its own
    return RLConfig.preset("grpo", steps=cfg.steps, seed=seed, log_every=0, learning_rate=cfg.learning_rate,
                           num_iterations=cfg.num_iterations, beta=0.0, task=cfg.task, **extra.get(arm, {}))


def run(cfg: Config, seed: int, env) -> dict:
    base = env.base(seed, cfg.task) if cfg.start == "base" else get_erring_model(
        seed, cache=env.cache, device=env.device, log=None, task=cfg.task)
    probs = test_problems(cfg.n_probe, "entropy", seed, task=cfg.task)
    out = {"start": probe(base, probs), "start_model": START_NAME[cfg.start], "steps": cfg.steps, "arms": {},
           "settings": {"learning_rate": cfg.learning_rate, "num_iterations": cfg.num_iterations,
                        "epsilon_high": cfg.epsilon_high, "entropy_coef": cfg.entropy_coef}}
    for arm in ARMS:
        policy, curve = copy.deepcopy(base), []
        t0 = time.perf_counter()

        def measure(rec, model, curve=curve):
            curve.append({"step": rec["step"], **probe(model, probs)})

        hist = train(policy, None, arm_config(arm, cfg, seed), log=None,
                     callback=every_n_steps(cfg.eval_every, measure))
        solved = next((c["step"] for c in curve if c["acc"] >= 0.99), None)
        out["arms"][arm] = {"curve": curve, "solved": solved, "seconds": round(time.perf_counter() - t0, 1),
                            "hist": [{k: h.get(k) for k in ("step", "entropy", "frac_reward_zero_std", "acc",
                                                             "clip_high", "clip_low")} for h in hist]}
    return out


def final(r: dict, arm: str, key: str = "format_H") -> float:
    return r["arms"][arm]["curve"][-1][key]


def mean_acc(r: dict, arm: str) -> float:
    """Greedy accuracy averaged over the run's probes: the area under its learning curve."""
    return float(np.mean([c["acc"] for c in r["arms"][arm]["curve"]]))


def clipped(r: dict, arm: str) -> float:
    """Share of tokens whose ratio the upper clip bit, over the run."""
    return float(np.mean([h["clip_high"] or 0.0 for h in r["arms"][arm]["hist"]]))


def steps_to_solve(r: dict, arm: str) -> float:
    """First probe at greedy accuracy >= 0.99; a run that never gets there counts its length (censored)."""
    return r["arms"][arm]["solved"] or r["steps"]


def q(r: dict) -> int:
    """A quarter of the run, in steps."""
    return max(1, r["steps"] // 4)


def zero_std(r: dict, arm: str, part: slice = slice(None)) -> float:
    return float(np.mean([h["frac_reward_zero_std"] for h in r["arms"][arm]["hist"][part]]))


PREMISES = ("start_entropy", "grpo_lowers")
"""the premises every claim rests on: a format choice with entropy to lose, and GRPO losing it"""


def premises(rs: list[dict]) -> list[dict]:
    """What the claims rest on, checked on the run: the start's format entropy (above half a nat), GRPO lowering it,
    GRPO's accuracy below 1 along the run (the accuracy claim) and GRPO not solved at its first probe (the steps
    claim)."""
    S = "entropy"
    first = rs[0]["arms"]["grpo"]["curve"][0]["step"]
    return [findings.premise(findings.seed_check(
                S, "The start's format choice has entropy to lose", "format entropy of the start (nats)",
                [r["start"]["format_H"] for r in rs], TH["entropy.start_h"]), "start_entropy"),
            findings.premise(findings.seed_check(
                S, "GRPO lowers the format entropy", "format entropy, start - GRPO's last probe (nats)",
                [r["start"]["format_H"] - final(r, "grpo") for r in rs], TH["entropy.grpo_lowers"]), "grpo_lowers"),
            findings.premise(findings.seed_check(
                S, "GRPO leaves accuracy room below 1 along the run", "1 - GRPO's mean probe accuracy",
                [1 - mean_acc(r, "grpo") for r in rs], TH["entropy.room"]), "acc_room"),
            findings.premise(findings.seed_check(
                S, "GRPO is not solved at its first probe", "GRPO's steps to 0.99 - its first probe's step",
                [steps_to_solve(r, "grpo") - first for r in rs], TH["entropy.room"]), "step_room")]


def room(cfg: Config) -> tuple[float, float]:
    """The primary's range by the design: a format entropy over the task's vocabulary lies in [0, ln V], so a
    difference of two lies within +-ln V."""
    V = len(tasks.get(cfg.task).vocab)
    return -math.log(V), math.log(V)


def placebo(cfg: Config) -> Config:
    """Clip-higher's upper clip set to GRPO's (epsilon = 0.2): the clip-higher arm is GRPO run again, on streams of
    its own (an independent replicate)."""
    return replace(cfg, epsilon_high=RLConfig().epsilon)


def claims(rs: list[dict]) -> list[dict]:
    S = "entropy"
    delta = lambda arm, key="format_H": [final(r, arm, key) - final(r, "grpo", key) for r in rs]   # noqa: E731
    return premises(rs) + [
        findings.primary(findings.seed_check(
            S, "Clip-higher keeps more format entropy than GRPO at the end of the run (the control: GRPO, the same run "
            "with the upper clip at 0.2 instead of 0.28; nothing else differs)", "format entropy at the last probe, "
            "clip-higher - GRPO (nats)", delta("clip_higher"), TH["entropy.clip_keeps"], control="GRPO",
            requires=list(PREMISES))),
        findings.seed_check(S, "Clip-higher pays in accuracy: its greedy accuracy along the run (the mean over the "
                            "probes) is above GRPO's", "mean probe accuracy, clip-higher - GRPO",
                            [mean_acc(r, "clip_higher") - mean_acc(r, "grpo") for r in rs], TH["entropy.clip_pays"],
                            control="GRPO", requires=[*PREMISES, "acc_room"]),
        findings.seed_check(S, "Clip-higher pays in steps: it reaches greedy accuracy 0.99 sooner than GRPO",
                            "steps to 0.99, GRPO - clip-higher (unsolved: the run's length)",
                            [steps_to_solve(r, "grpo") - steps_to_solve(r, "clip_higher") for r in rs],
                            TH["entropy.clip_faster"], control="GRPO", requires=[*PREMISES, "step_room"]),
        findings.seed_check(S, "The entropy bonus keeps more format entropy than GRPO at the end of the run (they "
                            "differ only in the bonus)", "format entropy at the last probe, bonus - GRPO (nats)",
                            delta("bonus"), TH["entropy.bonus_keeps"], control="GRPO", requires=list(PREMISES)),
        findings.seed_check(S, "As GRPO's entropy falls, more groups lose all reward variance: the zero-std share of "
                            "the run's last quarter exceeds that of its first", "frac_reward_zero_std, last quarter - "
                            "first quarter of the steps (GRPO)", [zero_std(r, "grpo", slice(-q(r), None))
                                                                  - zero_std(r, "grpo", slice(q(r))) for r in rs],
                            TH["entropy.zero_std_rise"], requires=list(PREMISES))]


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    fig, axes = plt.subplots(1, 3, figsize=(15, 4), layout="constrained")
    x = [0] + [c["step"] for c in rs[0]["arms"]["grpo"]["curve"]]
    for arm, label in ARMS.items():
        for ax, key in zip(axes, ("format_H", "acc")):
            band(ax, x, [[r["start"][key]] + [c[key] for c in r["arms"][arm]["curve"]] for r in rs], color=COLORS[arm],
                 label=label)
        steps = [h["step"] for h in rs[0]["arms"][arm]["hist"]]
        zs = np.array([[h["frac_reward_zero_std"] for h in r["arms"][arm]["hist"]] for r in rs])
        smooth = np.array([np.convolve(z, np.ones(5) / 5, mode="valid") for z in zs])
        band(axes[2], steps[2:len(steps) - 2], smooth, color=COLORS[arm], label=label)
    axes[0].axhline(math.log(3), color="grey", ls=":", lw=1)
    for ax, yl in zip(axes, ("format entropy at \"=\" (nats; dotted: ln 3)", "greedy accuracy (probe set)",
                             "groups with zero reward std (5-step mean)")):
        ax.set_xlabel("RL step")
        ax.set_ylabel(yl)
    axes[0].legend(fontsize=8)
    save(fig, os.path.join(out, "entropy", "curves.png"))
    fs = findings.gate(claims(rs))
    rows = []
    for arm in ("start", *ARMS):
        ps = [r["start"] if arm == "start" else r["arms"][arm]["curve"][-1] for r in rs]
        chain = " / ".join(pm([p["roles"][f]["chain"] for p in ps]) for f in ("short", "full"))
        mix = " / ".join(f"{np.mean([p['p_format'][f] for p in ps]):.2f}" for f in FORMATS)
        ans = " / ".join(pm([p["roles"][f]["answer"] for p in ps]) for f in ("short", "full"))
        solve = "—" if arm == "start" else pm([steps_to_solve(r, arm) for r in rs], "{:.0f}")
        rows.append([ARMS.get(arm, arm), pm([p["format_H"] for p in ps]), chain, ans, mix, pm([p["acc"] for p in ps]),
                     solve])
    table = md_table(["", "format entropy", "chain entropy S / T", "answer entropy S / T", "P(A / S / T)", "accuracy",
                      "steps to 0.99"], rows)
    st = rs[0]["settings"]
    head = "; ".join(f"{ARMS[a]} ends at format entropy {pm([final(r, a) for r in rs])}" for a in ARMS)
    md = f"""## Entropy: does clip-higher keep the format choice open?

{opening("entropy")}

![entropy, accuracy and zero-std groups along the runs](entropy/curves.png)

{table}

From the {rs[0]['start_model']}, {rs[0]['steps']} steps per arm, 16 problems × 8 samples, no KL, learning rate
{st['learning_rate']:g} and {st['num_iterations']} updates per batch; clip-higher raises the upper clip from 0.2 to
{st['epsilon_high']:g} (the upper clip bit on {pm([100 * clipped(r, 'grpo') for r in rs], '{:.2f}')} % of GRPO's
tokens, {pm([100 * clipped(r, 'clip_higher') for r in rs], '{:.2f}')} % of clip-higher's), the bonus arm adds
{st['entropy_coef']:g} × entropy. Entropies are exact (teacher-forced on each format's correct solution to the
held-out probe problems), chain and answer entropies per role, at the last probe (A's answer, written without a
chain, stays a guess where a direct answer is at chance); mean ± std over seeds, bands min..max.
{" ".join(findings.verdict_line(f) for f in fs)}

{reading("entropy")}
"""
    return [(md, head)]


def check(result) -> None:
    if not isinstance(result.get("arms"), dict) or set(result["arms"]) != set(ARMS) or "start" not in result \
            or any(not a.get("curve") or not a.get("hist") for a in result["arms"].values()):
        raise ValueError("an entropy result needs its start probe and every arm's curve and history")


QUESTION = """RL sharpens the policy: how fast does the entropy of the format choice collapse under GRPO, does
DAPO's clip-higher (or an entropy bonus) keep it, and does that pay in accuracy or in steps? And how many groups
lose all reward variance on the way?"""
PAPERS = """DAPO (Yu et al. 2025, arXiv 2503.14476); Cui et al. 2025, "The Entropy Mechanism of Reinforcement
Learning for Reasoning Language Models" (arXiv 2505.22617)."""
EXPLORE = """`reasonlab lab --only entropy`; `entropy.probe(model, problems)` measures one policy;
`RLConfig.preset("grpo", entropy_coef=1e-2)` is the bonus Cui et al. saw explode."""

register(Experiment("entropy", Config, run, claims, render, question=QUESTION, papers=PAPERS, explore=EXPLORE,
                    depends=on_erring(), check=check,
                    takes_checkpoint=False, room=room, placebo=placebo,
                    quick=Config(start="base", steps=6, eval_every=3, n_probe=5), run_cost=35, render_cost=1.0,
                    tier="lesson"))
