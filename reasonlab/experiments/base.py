"""The base model: how accurate is each format, and which does the model choose on its own?

A demonstration: it asks no open question. That chains beat direct answers at every k >= 3 is the base recipe's own
stopping rule (it trains until forced S and T reach 0.95 at every k, while a direct answer at k >= 3 stays at
chance), so it is checked as a premise of the lessons built on this model, not counted as a finding."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..core.config import EVAL_N_MAX, GEN_ROW, N_K, fits
from ..core.evaluate import evaluate
from ..core.problems import ENUMERATE_UP_TO, test_problems
from ..core.task import FMT_NAMES, FORMATS
from ..io.report import TOKEN_COLOR, band, md_table, plt, save
from ..stats import findings
from ..stats.summary import pm
from . import Experiment, register
from .thresholds import THRESHOLDS as TH


@dataclass
class Config:
    n: int = 500
    """greedy test problems per k (this seed's own draw; k = 2 has 25, k = 3 250)"""

    def validate(self) -> None:
        if self.n > EVAL_N_MAX:
            raise ValueError(f"n must be at most {EVAL_N_MAX:,} (k = {ENUMERATE_UP_TO + 1} has no more test problems), "
                             f"got {self.n:,}")
        fits("n", self.n * N_K, GEN_ROW, N_K)           # all problems of a format are decoded in one batch


def run(cfg: Config, seed: int, env) -> dict:
    model, probs = env.base(seed), test_problems(cfg.n, "base", seed)
    table = {"free": evaluate(model, probs), **{tok: evaluate(model, probs, force=[tok]) for tok in FORMATS.values()}}
    return {c: {"acc": t["acc"], "length": t["length"], "share": t["share"],
                "acc_by_k": {k: v["acc"] for k, v in t["per_k"].items()}} for c, t in table.items()}


def chains_beat_direct(base: list[dict]) -> dict:
    """Chains beat direct answers from k >= 3 (the base recipe's stopping rule: a premise): the smallest gap, over
    k >= 3, between forced S and forced A."""
    gap = [min(r["S"]["acc_by_k"][k] - r["A"]["acc_by_k"][k] for k in r["S"]["acc_by_k"] if int(k) >= 3) for r in base]
    return findings.premise(findings.seed_check(
        "base", "Chains beat direct answers at every k >= 3 (the base recipe trains until they do)",
        "min over k >= 3 of acc(forced S) - acc(forced A)", gap, TH["base.chain_gain"]), "chains_beat_direct")


def claims(rs: list[dict]) -> list[dict]:
    return [chains_beat_direct(rs)]


def plot_accuracy_by_k(runs: list[dict], path: str) -> str:
    """Greedy accuracy per k, free and forced A / S / T: mean over seeds, band = min..max, chance 0.1."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ks = sorted(runs[0]["free"]["acc_by_k"], key=int)
    for c, color in TOKEN_COLOR.items():
        y = np.array([[r[c]["acc_by_k"][k] for k in ks] for r in runs])
        x = [int(k) for k in ks]
        band(ax, x, y, marker="o", ms=3, color=color, label=c if c == "free" else f"forced {c}")
    ax.axhline(0.1, color="grey", ls=":", lw=1, label="chance (0.1)")
    ax.set_xlabel("k (digits)")
    ax.set_ylabel("greedy accuracy")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8)
    ax.set_title(f"base model, {len(runs)} seed(s): mean, band = min..max", fontsize=9)
    return save(fig, path)


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    plot_accuracy_by_k(rs, os.path.join(out, "base", "accuracy_by_k.png"))
    rows = []
    for c in ("free", "A", "S", "T"):
        share = " / ".join(pm([r[c]["share"][f] for r in rs], "{:.2f}") for f in FMT_NAMES) if c == "free" else ""
        rows.append(["free (the model picks)" if c == "free" else "forced " + c, pm([r[c]["acc"] for r in rs]),
                     pm([min(r[c]["acc_by_k"].values()) for r in rs]), pm([r[c]["length"] for r in rs], "{:.2f}"),
                     share])
    table = md_table(["generation", "accuracy (k = 2..8)", "worst k", "mean tokens", "free share A / S / T"], rows)
    head = (f"forced S {pm([r['S']['acc'] for r in rs])}, forced T {pm([r['T']['acc'] for r in rs])}, "
            f"direct A {pm([r['A']['acc'] for r in rs])} (chance 0.1)")
    md = f"""## The base model: does writing a chain help?

> **Question.** A 200K-parameter GPT is pre-trained on a mix of direct answers (A), short chains (S) and full
> chains (T). How accurate is each format, and which does the model choose on its own?

![accuracy per k](base/accuracy_by_k.png)

{table}

Greedy decoding on this seed's test problems; mean ± std over seeds. A demonstration: the base recipe trains until
the chains are right, so the lesson below is checked as a premise, not counted as a finding.
{findings.verdict_line(chains_beat_direct(rs))} Free generation answers directly (A) in
{pm([r["free"]["share"]["direct"] for r in rs], "{:.2f}")} of problems: A was half of the pre-training mix, so the
model has to learn *when* to think (the `star`, `rl` and `adaptive` experiments).

*Papers:* chain of thought (Wei et al. 2022, arXiv 2201.11903); scratchpads (Nye et al. 2021, arXiv 2112.00114).
*Explore:* `reasonlab pretrain --recipe spec` trains the course module's recipe; change the mix in `BASE_CFG`.
"""
    return [(md, head)]


register(Experiment("base", Config, run, claims, render, keys=("free", "A", "S", "T"), quick=Config(n=40), run_cost=2,
                    render_cost=0.2))
