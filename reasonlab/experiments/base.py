"""The base model: how accurate is each format, and which does the model choose on its own?

A demonstration: it asks no open question. That chains beat direct answers at every k above the smallest is the base
recipe's own stopping rule (it trains until forced S and T reach 0.95 at every k, while on digits a direct answer at
k >= 3 stays at chance), so it is checked as a premise of the lessons built on this model, not counted as a
finding."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .. import tasks
from ..core.config import GEN_ROW, NTest, fits
from ..core.evaluate import evaluate
from ..core.problems import test_problems
from ..io.report import TOKEN_COLOR, band, chance_at, chance_level, k_label, md_table, plt, save
from ..stats import findings
from ..stats.summary import pm
from ..tasks import FMT_NAMES, FORMATS
from . import Experiment, opening, reading, register, task_of
from .thresholds import THRESHOLDS as TH


@dataclass
class Config:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    n_test: NTest = 500
    """greedy test problems per k (this seed's own draw; digits' k = 2 has 25, k = 3 250)"""

    def validate(self) -> None:
        n_k = len(tasks.get(self.task).ks())
        fits("n_test", self.n_test * n_k, GEN_ROW, n_k)           # all problems of a format are decoded in one batch


def run(cfg: Config, seed: int, env) -> dict:
    spec = tasks.get(cfg.task).spec
    model, probs = env.base(seed, cfg.task), test_problems(cfg.n_test, "base", seed, task=cfg.task)
    table = {"free": evaluate(model, probs), **{tok: evaluate(model, probs, force=[tok]) for tok in FORMATS.values()}}
    out = {c: {"acc": t["acc"], "length": t["length"], "share": t["share"],
               "acc_by_k": {k: v["acc"] for k, v in t["per_k"].items()}} for c, t in table.items()}
    return out if spec == "digits" else {**out, "task": spec}      # a digits result keeps the keys it always had


def chains_beat_direct(base: list[dict]) -> dict:
    """Chains beat direct answers at every k above the task's smallest (digits: k >= 3; the base recipe's stopping
    rule: a premise): the smallest gap over those k between forced S and forced A."""
    k0 = task_of(base[0]).k_min + 1
    gap = [min(r["S"]["acc_by_k"][k] - r["A"]["acc_by_k"][k] for k in r["S"]["acc_by_k"] if int(k) >= k0) for r in base]
    return findings.premise(findings.seed_check(
        "base", f"Chains beat direct answers at every k >= {k0} (the base recipe trains until they do)",
        f"min over k >= {k0} of acc(forced S) - acc(forced A)", gap, TH["base.chain_gain"]), "chains_beat_direct")


def claims(rs: list[dict]) -> list[dict]:
    return [chains_beat_direct(rs)]


def plot_accuracy_by_k(runs: list[dict], path: str) -> str:
    """Greedy accuracy per k, free and forced A / S / T: mean over seeds, band = min..max, and chance (digits:
    0.1)."""
    task = task_of(runs[0])
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ks = sorted(runs[0]["free"]["acc_by_k"], key=int)
    x = [int(k) for k in ks]
    for c, color in TOKEN_COLOR.items():
        y = np.array([[r[c]["acc_by_k"][k] for k in ks] for r in runs])
        band(ax, x, y, marker="o", ms=3, color=color, label=c if c == "free" else f"forced {c}")
    chance = [chance_at(task, k) for k in x]
    if len(set(chance)) == 1:
        ax.axhline(chance[0], color="grey", ls=":", lw=1, label=f"chance ({chance[0]:.2g})")
    else:
        ax.plot(x, chance, color="grey", ls=":", lw=1, label="chance (the commonest answer)")
    ax.set_xlabel(k_label(task))
    ax.set_ylabel("greedy accuracy")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8)
    ax.set_title(f"base model, {len(runs)} seed(s): mean, band = min..max", fontsize=9)
    return save(fig, path)


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    task = task_of(rs[0])
    plot_accuracy_by_k(rs, os.path.join(out, "base", "accuracy_by_k.png"))
    rows = []
    for c in ("free", "A", "S", "T"):
        share = " / ".join(pm([r[c]["share"][f] for r in rs], "{:.2f}") for f in FMT_NAMES) if c == "free" else ""
        rows.append(["free (the model picks)" if c == "free" else "forced " + c, pm([r[c]["acc"] for r in rs]),
                     pm([min(r[c]["acc_by_k"].values()) for r in rs]), pm([r[c]["length"] for r in rs], "{:.2f}"),
                     share])
    table = md_table(["generation", f"accuracy (k = {task.k_min}..{task.k_max})", "worst k", "mean tokens",
                      "free share A / S / T"], rows)
    head = (f"forced S {pm([r['S']['acc'] for r in rs])}, forced T {pm([r['T']['acc'] for r in rs])}, "
            f"direct A {pm([r['A']['acc'] for r in rs])} (chance {chance_level(task):.2g})")
    md = f"""## The base model: does writing a chain help?

{opening("base")}

![accuracy per k](base/accuracy_by_k.png)

{table}

Greedy decoding on this seed's test problems; mean ± std over seeds. A demonstration: the base recipe trains until
the chains are right, so the lesson below is checked as a premise, not counted as a finding.
{findings.verdict_line(chains_beat_direct(rs))} Free generation answers directly (A) in
{pm([r["free"]["share"]["direct"] for r in rs], "{:.2f}")} of problems: A was half of the pre-training mix, so the
model has to learn *when* to think (the `star`, `rl` and `adaptive` experiments).

{reading("base")}
"""
    return [(md, head)]


QUESTION = """A 200K-parameter GPT is pre-trained on a mix of direct answers (A), short chains (S) and full chains
(T). How accurate is each format, and which does the model choose on its own?"""
PAPERS = """chain of thought (Wei et al. 2022, arXiv 2201.11903); scratchpads (Nye et al. 2021, arXiv 2112.00114)."""
EXPLORE = """`reasonlab pretrain --recipe spec` trains the course module's recipe; change the mix in `BASE_CFG`."""

register(Experiment("base", Config, run, claims, render, question=QUESTION, papers=PAPERS, explore=EXPLORE,
                    keys=("free", "A", "S", "T"), quick=Config(n_test=40), run_cost=2,
                    render_cost=0.2))
