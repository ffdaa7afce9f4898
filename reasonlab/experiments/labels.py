"""Process labels, measured: how often Math-Shepherd's Monte-Carlo step labels (Wang et al. 2023, arXiv 2312.08935)
disagree with the exact ones, by the number of rollouts.

Math-Shepherd labels a step by rolling the thinker out from it: the hard estimate says the step is right when any
of R rollouts reaches the right answer. Here every step can be checked (`verifier.oracle_labels`), so its false
positives (a wrong step whose rollouts still reach the answer: the thinker errs again and lands on it) and false
negatives (a right step whose rollouts all go wrong) are counted exactly, on the erring thinker's own S chains. The
rollouts of a step are the first R of 16, so the rates for every R come from one set of samples.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from ..core.pool import sample_pool
from ..core.problems import problems_per_k
from ..core.sampling import generate_n
from ..core.task import PROMPT_LEN, parse, prompt_ids
from ..io.report import plt, save
from ..methods.verifier import oracle_labels, steps
from ..stats import findings as F
from ..stats.summary import pm
from ..train.zoo import thinker_model
from . import Experiment, register
from .thresholds import THRESHOLDS as TH

ROLLOUTS = (1, 2, 4, 8, 16)


@dataclass
class Config:
    n: int = 100
    """test problems per k (one sampled S chain each; every step before the answer is labelled)"""


def run(cfg: Config, seed: int, env) -> dict:
    thinker = thinker_model("erring", seed, env.cache, env.device)
    probs = problems_per_k(cfg.n, f"labels-{seed}", split="test")
    pool = sample_pool(thinker, probs, 1, ["S"], 1.0, seed=seed, keep_outputs=True)
    todo = []                                               # (k, exact label, rollout prompt, answer)
    for d, (out,) in zip(probs, pool.outputs):
        exact = oracle_labels(d, out)
        for (i, _, is_answer), lab in zip(steps(out), exact):
            if not is_answer:
                todo.append((len(d), lab, prompt_ids(d) + out[:i + 1], sum(d) % 10))
    gen = torch.Generator().manual_seed(seed)
    hits: list[list[bool]] = [[] for _ in todo]
    by_len: dict[int, list[int]] = {}
    for j, t in enumerate(todo):
        by_len.setdefault(len(t[2]), []).append(j)
    R = max(ROLLOUTS)
    for idx in by_len.values():
        outs = generate_n(thinker, [todo[j][2] for j in idx], R, gen, 1.0)
        for a, j in enumerate(idx):
            prefix = todo[j][2][PROMPT_LEN:]
            hits[j] = [parse(prefix + o)["answer"] == todo[j][3] for o in outs[a * R:(a + 1) * R]]
    cells = {}
    for (k, lab, _, _), h in zip(todo, hits):
        c = cells.setdefault(f"{k}/{int(lab)}", {"n": 0, **{f"any{r}": 0 for r in ROLLOUTS}})
        c["n"] += 1
        for r in ROLLOUTS:
            c[f"any{r}"] += any(h[:r])
    return {"cells": cells, "steps": len(todo)}


def rate(r: dict, exact: int, rollouts: int, k: int | None = None) -> float:
    """The share of steps with this exact label whose hard estimate over `rollouts` says "right": the false-positive
    rate for exact = 0, the true-positive rate for exact = 1."""
    cs = [c for kl, c in r["cells"].items() if int(kl.split("/")[1]) == exact and (k is None or int(kl.split("/")[0]) == k)]
    return sum(c[f"any{rollouts}"] for c in cs) / max(1, sum(c["n"] for c in cs))


def count(r: dict, exact: int) -> int:
    return sum(c["n"] for kl, c in r["cells"].items() if int(kl.split("/")[1]) == exact)


def claims(rs: list[dict]) -> list[dict]:
    lo, hi = min(ROLLOUTS), max(ROLLOUTS)
    fp = [rate(r, 0, hi) - rate(r, 0, lo) for r in rs]
    fn = [(1 - rate(r, 1, lo)) - (1 - rate(r, 1, hi)) for r in rs]
    no_wrong = "no wrong steps to label: the thinker's chains are all right" if min(count(r, 0) for r in rs) == 0 else None
    no_right = "no right steps to label" if min(count(r, 1) for r in rs) == 0 else None
    return [F.seed_check("11 labels", f"More rollouts make Math-Shepherd's hard labels pass more wrong steps: the false-"
                         f"positive rate rises from {lo} to {hi} rollouts", f"FP({hi}) - FP({lo})", fp,
                         TH["labels.fp_rise"], untestable=no_wrong),
            F.seed_check("11 labels", f"More rollouts miss fewer right steps: the false-negative rate falls from {lo} to "
                         f"{hi} rollouts", f"FN({lo}) - FN({hi})", fn, TH["labels.fn_fall"], untestable=no_right),
            F.seed_check("11 labels", "At 8 rollouts (Math-Shepherd's N) more than 5 % of wrong steps are labelled right",
                         "FP(8)", [rate(r, 0, 8) for r in rs], TH["labels.fp_level"], untestable=no_wrong)]


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    for exact, name in ((0, "false positives (wrong step labelled right)"), (1, "false negatives (right step labelled wrong)")):
        y = np.array([[rate(r, 0, R) if exact == 0 else 1 - rate(r, 1, R) for R in ROLLOUTS] for r in rs])
        ax.errorbar(ROLLOUTS, y.mean(0), yerr=y.std(0), marker="o", ms=3, capsize=2, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("rollouts per step (the hard estimate: any reaches the answer)")
    ax.set_ylabel("rate")
    ax.legend(fontsize=8)
    save(fig, os.path.join(out, "labels", "rates.png"))
    rows = ["| rollouts | false positives | false negatives |", "|---|---|---|"]
    rows += [f"| {R} | {pm([rate(r, 0, R) for r in rs])} | {pm([1 - rate(r, 1, R) for r in rs])} |" for R in ROLLOUTS]
    fs = claims(rs)
    head = f"FP {pm([rate(r, 0, 8) for r in rs])}, FN {pm([1 - rate(r, 1, 8) for r in rs])} at 8 rollouts"
    md = f"""## 11. Process labels, measured: Math-Shepherd's rollouts against the exact labels

> **Question.** Math-Shepherd labels a step right when a rollout from it reaches the answer. How often is that
> label wrong, and how does the number of rollouts move the errors?

![label error rates](labels/rates.png)

{chr(10).join(rows)}

The erring thinker's sampled S chains ({rs[0]['steps']} steps before the answer per seed), 16 rollouts per step at
temperature 1; mean ± std over seeds. {" ".join(F.verdict_line(f) for f in fs)}

*Paper:* Math-Shepherd (Wang et al. 2023, arXiv 2312.08935).
*Explore:* `reasonlab lab --only labels`; `reasonlab verifier train --kind prm-mc --rollouts 2` trains a PRM on them.
"""
    return [(md, head)]


def check(result) -> None:
    if not isinstance(result.get("cells"), dict):
        raise ValueError("a labels result needs its cells")


register(Experiment("labels", Config, run, claims, render, check=check, quick=Config(n=3), run_cost=20,
                    render_cost=0.5, tier="lesson"))
