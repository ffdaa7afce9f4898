"""1. The base model: how accurate is each format, and which does the model choose on its own?"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..core.evaluate import eval_table
from ..core.task import FMT_NAMES
from ..io import report
from ..stats import findings
from ..stats.summary import pm
from . import Experiment, register
from .thresholds import THRESHOLDS as TH


@dataclass
class Config:
    n: int = 500
    """greedy test problems per k"""


def run(cfg: Config, seed: int, env) -> dict:
    table = eval_table(env.base(seed), cfg.n)
    return {c: {"acc": t["acc"], "length": t["length"], "share": t["share"],
                "acc_by_k": {k: v["acc"] for k, v in t["per_k"].items()}} for c, t in table.items()}


def chains_beat_direct(base: list[dict]) -> dict:
    """Chains beat direct answers from k >= 3: the smallest gap, over k >= 3, between forced S and forced A."""
    gap = [min(r["S"]["acc_by_k"][k] - r["A"]["acc_by_k"][k] for k in r["S"]["acc_by_k"] if int(k) >= 3) for r in base]
    return findings.seed_check("1 base", "Chains beat direct answers at every k >= 3",
                               "min over k >= 3 of acc(forced S) - acc(forced A)", gap, TH["base.chain_gain"])


def claims(rs: list[dict]) -> list[dict]:
    return [chains_beat_direct(rs)]


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    report.plot_lab_base(rs, os.path.join(out, "base", "accuracy_by_k.png"))
    rows = ["| generation | accuracy (k = 2..8) | worst k | mean tokens | free share A / S / T |", "|---|---|---|---|---|"]
    for c in ("free", "A", "S", "T"):
        share = " / ".join(pm([r[c]["share"][f] for r in rs], "{:.2f}") for f in FMT_NAMES) if c == "free" else ""
        rows.append(f"| {'free (the model picks)' if c == 'free' else 'forced ' + c} | {pm([r[c]['acc'] for r in rs])} | "
                    f"{pm([min(r[c]['acc_by_k'].values()) for r in rs])} | {pm([r[c]['length'] for r in rs], '{:.2f}')} | {share} |")
    head = (f"forced S {pm([r['S']['acc'] for r in rs])}, forced T {pm([r['T']['acc'] for r in rs])}, "
            f"direct A {pm([r['A']['acc'] for r in rs])} (chance 0.1)")
    md = f"""## The base model: does writing a chain help?

> **Question.** A 200K-parameter GPT is pre-trained on a mix of direct answers (A), short chains (S) and full
> chains (T). How accurate is each format, and which does the model choose on its own?

![accuracy per k](base/accuracy_by_k.png)

{chr(10).join(rows)}

Greedy decoding on the test set; mean ± std over seeds.
{findings.verdict_line(chains_beat_direct(rs))} Free generation answers directly (A) in
{pm([r["free"]["share"]["direct"] for r in rs], "{:.2f}")} of problems: A was half of the pre-training mix, so the
model has to learn *when* to think (the `star`, `rl` and `adaptive` experiments).

*Papers:* chain of thought (Wei et al. 2022, arXiv 2201.11903); scratchpads (Nye et al. 2021, arXiv 2112.00114).
*Explore:* `reasonlab pretrain --recipe spec` trains the course module's recipe; change the mix in `BASE_CFG`.
"""
    return [(md, head)]


register(Experiment("base", Config, run, claims, render, keys=("free", "A", "S", "T"), quick=Config(n=40), run_cost=2, render_cost=0.2))
