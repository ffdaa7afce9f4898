"""L1 as its authors train it: L1-Exact first, from a policy that writes several lengths; L1-Max from the Exact
checkpoint on mixed prompts; budgets a chain can reach; and a check, before each RL stage, that reading the budget
pays (Aggarwal & Welleck 2025, "L1: Controlling How Long A Reasoning Model Thinks With Reinforcement Learning", arXiv
2503.04697, section 3; cmu-l3/l1's training scripts).

The lab's `l1` experiment trains L1 straight from the base model, on every budget (digits: 0..8) whatever k. Here
(methods.budget.train_recipe): an SFT warm start on reachable budgets (the longest of A / S / T that fits), GRPO with
L1-Exact, then GRPO with a 50/50 mix of Exact prompts (B<b>) and Max prompts (M<b>, their own tokens) from the Exact
checkpoint.

The primary asks whether GRPO with L1-Exact earns more L1-Exact reward than the better of two policies without RL:
the best budget-blind one (one of the base model's formats for every budget, the best chosen with hindsight on the
same problems: it earns the reward without reading the budget at all; its reward computed from the base model's
measured accuracy and length per k, `budget.best_policies`) and the SFT start it begins from (which reads the
budget; where a direct answer partly works it can earn more than the blind policy, so either may be the better).
The placebo runs 0 Exact steps: the Exact arm is then the SFT start, trained again on draws of its own, so its
statistic is a replicate start against the start (or below, where the blind policy is the better).
`best_policies` prices what each RL stage could learn, from the lengths and accuracies it starts with: reading the
budget must pay at least the design bound, a premise that the stage's claims require.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace

import numpy as np

from .. import tasks
from ..core.config import NTest, Steps0
from ..core.problems import test_problems
from ..io.report import band, md_table, plt, save
from ..methods import budget
from ..methods.config import L1Fields
from ..stats import findings
from ..stats.summary import pm
from . import Experiment, opening, reading, register, replicate_seed, task_of
from .l1 import check_training, max_steps
from .thresholds import THRESHOLDS as TH

CURVES = {"start": "SFT start, B<b>", "exact": "L1-Exact, B<b>", "max_exact": "L1-Max, B<b>",
          "max_max": "L1-Max, M<b> (at most b)"}


@dataclass
class Config(L1Fields):
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    sft_steps: Steps0 = 300
    """supervised warm-start steps on reachable budgets (the longest fixed format that fits)"""
    exact_steps: Steps0 = 100
    """GRPO steps with L1-Exact from the warm start (0: the placebo, the Exact model is a second warm start, trained
    on draws of its own)"""
    max_steps: Steps0 = 100
    """GRPO steps with L1-Max and L1-Exact prompts mixed 50/50, from the Exact checkpoint"""
    n_test: NTest = 100
    """greedy test problems per k, at every budget and prompt kind, drawn per seed"""

    def validate(self) -> None:
        check_training(self, "l1_recipe")
        if self.exact_steps < 0 or self.max_steps < 0:
            raise ValueError("l1_recipe: exact_steps and max_steps >= 0")


def placebo(cfg: Config) -> Config:
    """No Exact GRPO: the Exact model is an SFT start trained again on draws of its own (an independent replicate of
    the treatment's start), read against the better of the blind policy and the start as the treatment is."""
    return replace(cfg, exact_steps=0)


def room(cfg: Config) -> tuple[float, float]:
    """The primary's statistic by the design: a cell's L1-Exact reward c - alpha |b - n| is in [-alpha max_steps, 1]
    (c in 0..1, b in 0..k, n in 0..max_steps: l1.max_steps, digits 13), so a difference of two models' rewards is
    within ±(1 + alpha max_steps)."""
    most = 1.0 + cfg.alpha * max_steps(cfg.task)
    return (-most, most)


def stored_config(cfg: Config) -> dict:
    """The config as a result records it: every field, the task as its spec, left out for digits (a digits result
    keeps the keys it always had)."""
    spec = tasks.get(cfg.task).spec
    out = asdict(cfg)
    return {k: v for k, v in out.items() if k != "task"} if spec == "digits" else {**out, "task": spec}


def run(cfg: Config, seed: int, env) -> dict:
    task = tasks.get(cfg.task)
    ks = task.ks()
    base = env.base(seed, cfg.task)
    kw = dict(cfg.l1_fields(), sft_steps=cfg.sft_steps, task=task)
    tr = budget.train_recipe(base, seed, exact_steps=cfg.exact_steps, max_steps=cfg.max_steps, **kw)
    if cfg.exact_steps == 0:   # the placebo: the Exact arm is the SFT start again, trained on draws of its own
        tr["exact"] = budget.train_recipe(base, replicate_seed(seed), exact_steps=0, max_steps=0, **kw)["start"]
    probs = test_problems(cfg.n_test, "l1_recipe", seed, task=task)
    fixed = budget.eval_fixed(base, probs)             # forced A, S, T on the base: per k, accuracy and steps
    fixed_opts = [[(fixed[f][k]["acc"], fixed[f][k]["steps"]) for f in "AST"] for k in ks]
    ev = lambda m, kind: budget.eval_recipe(m, probs, kind, cfg.alpha, cfg.delta)  # noqa: E731
    res = {"start": ev(tr["start"], "exact"), "exact": ev(tr["exact"], "exact"),
           "max_exact": ev(tr["max"], "exact"), "max_max": ev(tr["max"], "max"), "fixed": fixed_opts,
           "alpha": cfg.alpha, "delta": cfg.delta, "seconds": round(tr["seconds"], 1), "config": stored_config(cfg)}
    exact_opts = [[(res["exact"][b][i]["acc"], res["exact"][b][i]["steps"]) for b in range(k + 1)]
                  for i, k in enumerate(ks)]
    res["precheck"] = {               # "max_from_base_0to8": every budget of the task (digits: 0..8)
        "exact_from_base": budget.best_policies(fixed_opts, "exact", cfg.alpha, cfg.delta, task=task),
        "max_from_base_0to8": budget.best_policies(fixed_opts, "max", cfg.alpha, cfg.delta, reachable=False, task=task),
        "max_from_exact": budget.best_policies(exact_opts, "max", cfg.alpha, cfg.delta, task=task)}
    return res


def reachable(r: dict, curve: str, key: str) -> float:
    """A cell value over the reachable (b, k), weighted as training draws them (and best_policies averages): the mean
    over k of the mean over b = 0..k."""
    ks = task_of(r).ks()
    return float(np.mean([np.mean([r[curve][b][i][key] for b in range(k + 1)]) for i, k in enumerate(ks)]))


def spread(r: dict, curve: str) -> float:
    """Chain steps at the largest reachable budget (b = k) minus at b = 0, mean over k."""
    ks = task_of(r).ks()
    return float(np.mean([r[curve][k][i]["steps"] - r[curve][0][i]["steps"] for i, k in enumerate(ks)]))


def gap(r: dict, name: str) -> float:
    return r["precheck"][name]["aware"] - r["precheck"][name]["blind"]


PAYS = {"exact": "reading pays before L1-Exact", "max": "reading pays before L1-Max"}
"""the premises' names: reading the budget pays before each RL stage, which that stage's claims require"""


def premises(rs: list[dict]) -> list[dict]:
    """Before each RL stage, a budget-aware policy over the lengths it starts with earns at least the design bound
    more of the stage's reward than a budget-blind one (budget.best_policies)."""
    return [findings.premise(findings.seed_check(
        "l1_recipe", f"Before the {stage} stage, a budget-aware policy earns at least {TH['l1.aware_gap'].value:g} "
        f"more {stage} reward than a budget-blind one with {what}", f"aware - blind, expected {stage} reward, "
        "reachable b", [gap(r, pre) for r in rs], TH["l1.aware_gap"]), PAYS[kind])
        for kind, stage, pre, what in (("exact", "L1-Exact", "exact_from_base", "the base model's formats"),
                                       ("max", "L1-Max", "max_from_exact", "the Exact checkpoint's lengths"))]


def beyond_start(r: dict) -> float:
    """The L1-Exact model's L1-Exact reward over the better of the two policies without RL: the best budget-blind one
    and the SFT start (which is the higher depends on the task: either can be the trivial policy that would also
    pass)."""
    return reachable(r, "exact", "exact_r") - max(r["precheck"]["exact_from_base"]["blind"],
                                                   reachable(r, "start", "exact_r"))


def claims(rs: list[dict]) -> list[dict]:
    """The premises (reading the budget pays before each RL stage), the primary (GRPO with L1-Exact against the
    better of the best budget-blind policy and its SFT start: each is a trivial policy that would also earn the
    reward), then the Max stage's claims, which rest on the Max premise."""
    sec, need_max = "l1_recipe", [PAYS["max"]]
    return premises(rs) + [
        findings.primary(findings.seed_check(
            sec, "GRPO with L1-Exact earns more L1-Exact reward than the better of two policies that had no RL: the "
            "best budget-blind one (one of the base model's formats for every budget, the best chosen with hindsight "
            "on these problems) and its own SFT start (which already reads the budget)",
            "reward(L1-Exact) - max(reward(best budget-blind), reward(SFT start)), on B<b>, reachable b",
            [beyond_start(r) for r in rs], TH["l1.beats_blind"],
            control="the better of the best budget-blind policy over the base model's formats and the SFT start",
            requires=[PAYS["exact"]])),
        findings.seed_check(
            sec, "GRPO with L1-Exact raises the L1-Exact reward over its SFT start (the same model before the Exact "
            "stage: the arms differ only in the Exact GRPO steps)",
            "reward(L1-Exact) - reward(SFT start), on B<b>, reachable b",
            [reachable(r, "exact", "exact_r") - reachable(r, "start", "exact_r") for r in rs], TH["l1.rl_gain"],
            control="the SFT start", requires=[PAYS["exact"]]),
        findings.seed_check(sec, "L1-Max trained as L1 does (Max from the Exact checkpoint on mixed prompts) reads its "
                            "budget: on Max prompts it writes more than one chain step more at b = k than at b = 0",
                            "steps(b = k) - steps(b = 0) on M<b>, mean over k", [spread(r, "max_max") for r in rs],
                            TH["l1.reads_reachable"], requires=need_max),
        findings.seed_check(sec, "L1-Max earns more L1-Max reward on Max prompts than the best budget-blind policy over "
                            "the Exact checkpoint's lengths", "reward(L1-Max on M<b>) - blind, reachable b",
                            [reachable(r, "max_max", "max_r") - r["precheck"]["max_from_exact"]["blind"] for r in rs],
                            TH["l1.beats_blind"], control="the best budget-blind policy", requires=need_max),
        findings.seed_check(sec, "One model reads the two prompts apart: at the same budget it writes fewer steps when "
                            "told \"at most b\" (M<b>) than \"exactly b\" (B<b>)", "steps on B<b> - steps on M<b>, "
                            "L1-Max model, reachable b", [reachable(r, "max_exact", "steps")
                                                          - reachable(r, "max_max", "steps") for r in rs],
                            TH["l1.kinds_apart"], control="the same model on the other prompt", requires=need_max)]


def checked(rs: list[dict]) -> list[dict]:
    """The claims as the lab judges them: the primary against the design's room (from the config the results
    stored), every claim gated by the premises it requires."""
    return findings.judge(claims(rs), room(Config(**rs[0]["config"])))


def curve(r: dict, name: str, key: str) -> list[float]:
    """A cell value against b, mean over the k that can reach b."""
    task = task_of(r)
    return [float(np.mean([r[name][b][i][key] for i, k in enumerate(task.ks()) if b <= k])) for b in task.budgets]


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    task = task_of(rs[0])
    bs = task.budgets
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    for name, c in zip(CURVES, ("#8C8C8C", "#4C72B0", "#55A868", "#C44E52")):
        for ax, key in zip(axes, ("steps", "acc")):
            band(ax, bs, [curve(r, name, key) for r in rs], alpha=0.12, marker="o", ms=3, color=c,
                 label=CURVES[name])
    axes[0].plot(bs, bs, ls=":", color="k", lw=1, label="steps = b")
    axes[0].set_ylabel("chain steps written (mean over k >= b)")
    axes[1].set_ylabel("accuracy (mean over k >= b)")
    for ax in axes:
        ax.set_xlabel("budget b (chain steps)")
    axes[0].legend(fontsize=8)
    save(fig, os.path.join(out, "l1_recipe", "budgets.png"))
    prices = md_table(["before", "reward", "best budget-blind", "best budget-aware", "aware - blind"], [
        [label, rw, pm([r["precheck"][name]["blind"] for r in rs]), pm([r["precheck"][name]["aware"] for r in rs]),
         pm([gap(r, name) for r in rs])]
        for name, label, rw in (("max_from_base_0to8", f"L1-Max from the base (b in 0..{bs[-1]}, as in the `l1` "
                                 "experiment)", "Max"),
                                ("exact_from_base", "L1-Exact from the warm start (A / S / T), reachable b", "Exact"),
                                ("max_from_exact", "L1-Max from the Exact checkpoint, reachable b", "Max"))])
    trained = md_table(["model, prompt", "steps(b = k) - steps(b = 0)", "accuracy", "L1-Exact reward", "L1-Max reward"], [
        [label, pm([spread(r, name) for r in rs]), pm([reachable(r, name, "acc") for r in rs]),
         pm([reachable(r, name, "exact_r") for r in rs]), pm([reachable(r, name, "max_r") for r in rs])]
        for name, label in CURVES.items()])
    fs = checked(rs)
    prim = findings.as_judged(next(f for f in fs if findings.kind_of(f) == findings.PRIMARY))
    head = (f"GRPO with L1-Exact over the better of the blind policy and its start: {prim['value']:+.3f} L1-Exact "
            f"reward ({prim['verdict']}); "
            f"reading the budget pays {pm([gap(r, 'exact_from_base') for r in rs])} before L1-Exact, "
            f"{pm([gap(r, 'max_from_exact') for r in rs])} before L1-Max")
    md = f"""## L1 as its authors train it: Exact first, Max from Exact, budgets a chain can reach

{opening("l1_recipe")}

![L1's recipe](l1_recipe/budgets.png)

What a perfect policy could earn before each RL stage, from the lengths and accuracies it starts with (expected
reward, budgets uniform; an option's reward at its mean steps):

{prices}

After training, greedy on the test problems, reachable cells (b <= k):

{trained}

α = {rs[0]['alpha']:g} per step, δ = {rs[0]['delta']:g}; {pm([r['seconds'] for r in rs], '{:.0f}')} s of training
per seed; mean ± std over seeds; each seed scores its own test problems (`test_problems(n_test, "l1_recipe",
seed)`), training draws from the train part. The primary's control is the better, per seed, of the best
budget-blind policy (the "best budget-blind" column before L1-Exact: one of the base model's formats for every budget,
which earns L1-Exact reward without reading the budget at all) and the SFT start (the same model before the Exact
stage); the placebo (`reasonlab lab --placebo`) runs 0 Exact steps. Each stage's claims rest on its premise
(reading the budget pays at least {TH['l1.aware_gap'].value:g} before it).
{" ".join(findings.verdict_line(f) for f in fs)}

*Paper:* Aggarwal & Welleck 2025, arXiv 2503.04697 (cmu-l3/l1).
{reading("l1_recipe")}
"""
    return [(md, head)]


def check(result) -> None:
    if any(key not in result for key in (*CURVES, "precheck", "fixed", "config")) or \
            len(result["max_max"]) != len(task_of(result).budgets):
        raise ValueError("an l1_recipe result needs every model's cells at every budget, the pre-checks and its config")


QUESTION = """Trained the way L1's authors train it (a warm start that already reads the budget, Exact first, Max
from the Exact checkpoint), does GRPO add to what its start does, does L1-Max read the budget, and was there
anything to learn before each stage?"""
EXPLORE = """`reasonlab l1_recipe`; `budget.train_recipe(base, seed)` returns the three models;
`budget.best_policies` prices any set of lengths before training."""

register(Experiment("l1_recipe", Config, run, claims, render, question=QUESTION, explore=EXPLORE,
                    check=check, streams=1,
                    quick=Config(sft_steps=4, exact_steps=2, max_steps=2, n_test=2), run_cost=20, render_cost=0.3,
                    tier="lesson", room=room, placebo=placebo,
                    negative="the SFT start in the Exact model's place: at most 0 by construction (the control "
                    "includes the start)"))
