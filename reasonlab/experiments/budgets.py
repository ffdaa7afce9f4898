"""Thinking longer: forced formats and thinking budgets (s1's budget forcing)."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..core.problems import ENUMERATE_UP_TO, problems_per_k
from ..io.report import TOKEN_COLOR, md_table, plt, save
from ..methods import tts
from ..stats import findings
from ..stats.findings import both, finding, seed_check
from ..stats.summary import mean_std, pm
from . import Experiment, register
from .thresholds import THRESHOLDS as TH

N_MOST = 10 ** (ENUMERATE_UP_TO + 1)
"""The most problems per k: the smallest k drawn at random rather than enumerated has no more distinct ones."""


@dataclass
class Config:
    n: int = 200
    """problems per k for the budget-forcing sweep"""

    def validate(self) -> None:
        if self.n > N_MOST:
            raise ValueError(f"n must be at most {N_MOST:,} (k = {ENUMERATE_UP_TO + 1} has no more distinct problems), "
                             f"got {self.n:,}")


def run(cfg: Config, seed: int, env) -> dict:
    model = env.base(seed)
    probs = problems_per_k(cfg.n, seed=seed + 1)
    return {"budgets": (tts.budget_sweep(model, probs, "T", range(0, 9))
                        + tts.budget_sweep(model, probs, "S", range(0, 5))
                        + tts.budget_sweep(model, probs, "T", range(9, 13), kind="min"))}


def budget_trades_accuracy_for_tokens(budgets: list[dict]) -> dict:
    """Capping T's chain at b steps: more budget, more accuracy and more tokens (b = 0 against the largest b)."""
    def rows(r):
        t = sorted((b for b in r["budgets"] if b["format"] == "T" and b["kind"] == "max"), key=lambda b: b["budget"])
        return t[0], t[-1]
    acc = [hi["acc"] - lo["acc"] for lo, hi in map(rows, budgets)]
    tok = [hi["tokens"] - lo["tokens"] for lo, hi in map(rows, budgets)]
    bmax = rows(budgets[0])[1]["budget"]
    a = seed_check("2 budgets", "", "", acc, TH["budgets.cap_gain"])
    t = seed_check("2 budgets", "", "", tok, 0.0)
    return finding("2 budgets", f"Budget forcing trades accuracy for tokens: T capped at {bmax} steps is more accurate "
                   f"than at 0 steps, and costs more tokens", f"acc(T, <= {bmax}) - acc(T, <= 0)", a["value"],
                   a["ci95"], a["per_seed"], "> 0 (and the token difference > 0)", both(a["verdict"], t["verdict"]),
                   p=max(a["p"], t["p"]), source=TH["budgets.cap_gain"].source,
                   tokens={"value": t["value"], "ci95": t["ci95"], "per_seed": t["per_seed"]})


def claims(rs: list[dict]) -> list[dict]:
    return [budget_trades_accuracy_for_tokens(rs)]


def plot_budgets(budgets: list[dict], path: str) -> str:
    """Greedy accuracy against thinking tokens under s1 budget forcing (max: chain capped; min: chain extended),
    with error bars from each row's lo..hi."""
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for f in ("S", "T"):
        for kind, style in (("max", "-"), ("min", "--")):
            rows = [b for b in budgets if b["format"] == f and b["kind"] == kind]
            if rows:
                ax.errorbar([b["thinking_tokens"] for b in rows], [b["acc"] for b in rows],
                            yerr=[[b["acc"] - b["lo"] for b in rows], [b["hi"] - b["acc"] for b in rows]],
                            ls=style, marker="o", ms=3, color=TOKEN_COLOR[f],
                            label=f"{f}, {'at most' if kind == 'max' else 'at least'} b steps")
    ax.axhline(0.1, color="grey", ls=":", lw=1, label="chance (0.1)")
    ax.set_xlabel("thinking tokens (chain steps written)")
    ax.set_ylabel("greedy accuracy (k = 2..8)")
    ax.legend(fontsize=8)
    return save(fig, path)


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    keys = [(b["format"], b["kind"], b["budget"]) for b in rs[0]["budgets"]]
    avg = []
    for i, key in enumerate(keys):
        acc = [r["budgets"][i]["acc"] for r in rs]
        m, s = mean_std(acc)
        avg.append({"format": key[0], "kind": key[1], "budget": key[2], "acc": m, "lo": m - s, "hi": m + s,
                    "thinking_tokens": float(np.mean([r["budgets"][i]["thinking_tokens"] for r in rs])),
                    "tokens": float(np.mean([r["budgets"][i]["tokens"] for r in rs]))})
    plot_budgets(avg, os.path.join(out, "budgets", "budgets.png"))
    table = md_table(["format", "chain budget", "chain steps written", "accuracy"],
                     [[b["format"], f"{'at most' if b['kind'] == 'max' else 'at least'} {b['budget']}",
                       f"{b['thinking_tokens']:.2f}", pm([r["budgets"][i]["acc"] for r in rs])]
                      for i, b in enumerate(avg)])
    t = [b for b in avg if b["format"] == "T" and b["kind"] == "max"]
    mins = [i for i, b in enumerate(avg) if b["format"] == "T" and b["kind"] == "min"]
    natural = pm([r["budgets"][[i for i, b in enumerate(avg) if b is t[-1]][0]]["acc"] for r in rs])
    longest = (avg[mins[-1]]["budget"], pm([r["budgets"][mins[-1]]["acc"] for r in rs])) if mins else ("—", "—")
    head = f"T capped at 0 steps {t[0]['acc']:.2f} → {t[-1]['budget']} steps {t[-1]['acc']:.2f}"
    md = f"""## Thinking longer: forced formats and thinking budgets

> **Question.** If we force the model to think for at most (or at least) b chain steps, how does accuracy follow
> the thinking budget?

![budget forcing](budgets/budgets.png)

{table}

Greedy decoding; "at most b": once the chain has b running sums the answer marker is forced (s1's budget cap);
"at least b": the end of the chain is suppressed until b sums are written (s1's "Wait"). Error bars: ± std over
seeds. Tokens count up to the end of the answer. {findings.verdict_line(budget_trades_accuracy_for_tokens(rs))}
Forced past its natural end (T, at least {longest[0]} steps): accuracy {longest[1]} against {natural} with the chain
uncapped at {t[-1]['budget']} steps.

*Paper:* s1: simple test-time scaling (Muennighoff et al. 2025, arXiv 2501.19393).
*Explore:* `tts.budget_hook(max_chain=b)` on any generation; `reasonlab sampling --budgets` adds the budget-forced
points to the sampling frontier.
"""
    return [(md, head)]


register(Experiment("budgets", Config, run, claims, render, keys=("budgets",), quick=Config(n=30), run_cost=4,
                    render_cost=0.1))
