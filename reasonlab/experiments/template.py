"""Your idea in one file: copy this file, rename the experiment, and run it with

    reasonlab lab --experiment my_idea.py --only my_idea --quick

The question here: does thinking (a forced full chain, T) beat answering at once (A) on the hardest problems?
Replace run, claims and render with your own; keep the shape (docs/your_idea.md walks through it).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import matplotlib.pyplot as plt

from reasonlab.core.config import NTest
from reasonlab.core.evaluate import evaluate
from reasonlab.core.problems import test_problems
from reasonlab.experiments import Experiment, opening, reading, register
from reasonlab.io.report import save
from reasonlab.stats.findings import seed_check, verdict_line
from reasonlab.stats.summary import pm
from reasonlab.tasks import get


@dataclass
class Config:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    n_test: NTest = 200
    """test problems per k"""
    k: int = 8
    """the problem size the claim is about"""

    def validate(self) -> None:
        task = get(self.task)
        if self.k not in task.ks():
            raise ValueError(f"k must be in {task.k_min}..{task.k_max}, got {self.k}")


def run(cfg: Config, seed: int, env) -> dict:
    """One seed: greedy accuracy per k of forced A and forced T (a JSON-able dict; int keys come back as ints)."""
    model = env.base(seed, cfg.task)
    probs = test_problems(cfg.n_test, "my_idea", seed, task=cfg.task)      # this seed's own draw from the test part
    out = {"k": cfg.k}
    for fmt in ("A", "T"):
        r = evaluate(model, probs, force=[fmt])
        out[fmt] = {k: v["acc"] for k, v in r["per_k"].items()}
    return out


def claims(rs: list[dict]) -> list[dict]:
    """One claim, judged on the t interval over seeds: forced T beats forced A at k."""
    k = rs[0]["k"]
    gap = [r["T"][k] - r["A"][k] for r in rs]
    return [seed_check("my idea", f"Thinking (forced T) beats answering at once (forced A) at k = {k}",
                       f"acc(T) - acc(A) at k = {k}", gap, 0.0)]


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for fmt in ("A", "T"):
        ks = sorted(rs[0][fmt])
        ax.plot(ks, [sum(r[fmt][k] for r in rs) / len(rs) for k in ks], marker="o", label=f"forced {fmt}")
    ax.set_xlabel("k (problem size)")
    ax.set_ylabel("greedy accuracy")
    ax.legend()
    save(fig, os.path.join(out, "my_idea", "accuracy.png"))
    k = rs[0]["k"]
    head = f"at k = {k}: T {pm([r['T'][k] for r in rs])}, A {pm([r['A'][k] for r in rs])}"
    md = f"""## My idea: does thinking pay on the hardest problems?

{opening("my_idea")}

![accuracy by k](my_idea/accuracy.png)

{verdict_line(claims(rs)[0])}

{reading("my_idea")}
"""
    return [(md, head)]


register(Experiment("my_idea", Config, run, claims, render, quick=Config(n_test=20),
                    question="Does thinking (a forced full chain, T) beat answering at once (A) on the hardest problems?",
                    papers="chain of thought (Wei et al. 2022, arXiv 2201.11903)",
                    explore="`reasonlab sweep my_idea --experiment my_idea.py --grid k=6,7,8`"))
