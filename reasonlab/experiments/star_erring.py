"""STaR where reasoning must improve: self-training the erring thinker on its own forced S chains, by filter.

On the base model STaR's gain is a format choice: forced S is already right every time, and STaR teaches the model to
pick S. The erring thinker misreads digits (its forced S chains err), so here the chains themselves must get better.
Each round samples forced S chains, keeps those that pass the filter and fine-tunes the thinker on them alone
(no fresh problems with the spec's chains: `fixed_frac` 1, so every right step it learns it wrote itself):
    answer  STaR's filter: the right answer (Zelikman et al. 2022, arXiv 2203.14465);
    chain   the right answer and every running sum checks (RFT's step check, Yuan et al. 2023, arXiv 2308.01825);
    none    every complete chain, right or wrong: the control that fine-tuning on its own samples alone does it.
The answer filter admits chains whose two errors cancel; the chain filter does not. Both are read on greedy
forced S and T accuracy over the rounds.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..io.report import band, md_table, plt, save
from ..methods.config import StarConfig
from ..stats import findings
from ..stats.summary import pm
from ..train.zoo import on_erring, thinker_model
from . import Experiment, register
from .star import star_rounds
from .thresholds import THRESHOLDS as TH

FILTERS = ("none", "answer", "chain")
SHOWN = {"none": "no filter (control)", "answer": "answer filter (STaR)", "chain": "chain filter (RFT)"}


@dataclass
class Config:
    rounds: int = 2
    """STaR rounds (each fine-tunes the thinker afresh on the round's kept chains)"""
    problems: int = 3000
    """fresh problems per round, k uniform in 2..8"""
    samples: int = 4
    """forced S chains sampled per problem at temperature 1 (at most one kept per problem)"""
    steps: int = 300
    """fine-tuning steps in round 1 (STaR's +20 % per round after)"""
    eval_n: int = 100
    """greedy test problems per k for each round's evaluation"""

    def validate(self) -> None:
        star_config(self, "answer", seed=0).validate()


def star_config(cfg: Config, f: str, seed: int) -> StarConfig:
    """Forced S chains, kept by filter f, the thinker fine-tuned on them alone."""
    return StarConfig(rounds=cfg.rounds, problems=cfg.problems, samples=cfg.samples, force="S", filter=f,
                      fixed_frac=1.0, steps=cfg.steps, seed=seed)


def run(cfg: Config, seed: int, env) -> dict:
    thinker = thinker_model("erring", seed, env.cache, env.device)
    return {f: star_rounds(thinker, f"erring-seed{seed}", star_config(cfg, f, seed), cfg.eval_n, env.cache)
            for f in FILTERS}


def acc(r: dict, f: str, rnd: int, fmt: str = "S") -> float:
    return r[f][rnd][fmt]


def claims(rs: list[dict]) -> list[dict]:
    """At round 1 (before a second round can take both filters to the ceiling): STaR raises forced S accuracy
    (primary), beats fine-tuning on unfiltered samples, and the chain filter beats the answer filter where the
    sampled right answers hold wrong chains."""
    sec = "16 star_erring"
    fp = [r["answer"][1]["false_positive_rate"] for r in rs]
    same = (f"at most {max(fp):.3f} of the sampled right answers had a wrong step, under the design bound "
            f"{TH['star.filter_room'].value:g}: both filters train on nearly the same data") \
        if max(fp) < TH["star.filter_room"].value else None
    return [findings.seed_check(sec, "STaR raises the erring thinker's forced S accuracy in one round (the chains get better, "
                         "not the format choice)", "S(round 1) - S(round 0), answer filter",
                         [acc(r, "answer", 1) - acc(r, "answer", 0) for r in rs], TH["star.gain"],
                         room=float(np.mean([1 - acc(r, "answer", 0) for r in rs])), control="the thinker before STaR"),
            findings.seed_check(sec, "STaR beats fine-tuning on the thinker's own unfiltered chains (the control: the same "
                         "rounds, no filter)", "S(round 1): answer filter - no filter",
                         [acc(r, "answer", 1) - acc(r, "none", 1) for r in rs], TH["star.gain"],
                         control="no filter"),
            findings.seed_check(sec, "The chain filter beats the answer filter: chains whose errors cancel teach wrong steps",
                         "S(round 1): chain filter - answer filter",
                         [acc(r, "chain", 1) - acc(r, "answer", 1) for r in rs], TH["star.filter_gain"],
                         room=float(np.mean([1 - acc(r, "answer", 1) for r in rs])), untestable=same,
                         control="the answer filter")]


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained", sharey=True)
    rounds = range(len(rs[0]["answer"]))
    for ax, fmt in zip(axes, "ST"):
        for f, c in zip(FILTERS, ("#8C8C8C", "#4C72B0", "#C44E52")):
            band(ax, list(rounds), [[acc(r, f, i, fmt) for i in rounds] for r in rs], marker="o", ms=4, color=c,
                 label=SHOWN[f])
        ax.set_xticks(list(rounds))
        ax.set_xlabel("STaR round (0: the erring thinker)")
        ax.set_title(f"greedy forced {fmt} accuracy" + (" (trained on S chains only)" if fmt == "T" else ""))
    axes[0].set_ylabel("accuracy (all k)")
    axes[0].legend(fontsize=8)
    save(fig, os.path.join(out, "star_erring", "rounds.png"))
    last = len(rs[0]["answer"]) - 1
    table = md_table(["filter", *(f"S, round {i}" for i in rounds), f"T, round {last}", "kept, round 1"],
                     [[SHOWN[f], *(pm([acc(r, f, i) for r in rs]) for i in rounds),
                       pm([acc(r, f, last, "T") for r in rs]), pm([r[f][1]["n_kept"] for r in rs], "{:.0f}")]
                      for f in FILTERS])
    fs = claims(rs)
    head = (f"forced S {pm([acc(r, 'answer', 0) for r in rs])} -> {pm([acc(r, 'answer', 1) for r in rs])} (answer "
            f"filter), {pm([acc(r, 'chain', 1) for r in rs])} (chain filter) in one round")
    md = f"""## STaR where reasoning must improve: the erring thinker, by filter

> **Question.** On the base model STaR only teaches the format choice. On a thinker whose chains err, does
> training on its own filtered chains make the chains better, and does checking every step matter?

![STaR rounds](star_erring/rounds.png)

{table}

Each round samples forced S chains (several per problem, at most one kept) and fine-tunes the erring thinker on
the kept chains alone; evaluation is greedy on the test problems; mean ± std over
seeds. Sampled right answers with a wrong step in round 1 (what the answer filter admits and the chain filter
does not):
{pm([r['answer'][1]['false_positive_rate'] for r in rs], '{:.3f}')}. {" ".join(findings.verdict_line(f) for f in fs)}

*Papers:* STaR (Zelikman et al. 2022, arXiv 2203.14465); RFT (Yuan et al. 2023, arXiv 2308.01825).
*Explore:* `reasonlab lab --only star_erring`; `reasonlab star --variants main chain think think+chain` runs STaR
on the base model.
"""
    return [(md, head)]


def check(result) -> None:
    if any(f not in result or not isinstance(result[f], list) or len(result[f]) < 2 for f in FILTERS):
        raise ValueError("a star_erring result needs every filter's rounds (round 0 and at least one more)")


register(Experiment("star_erring", Config, run, claims, render, depends=on_erring(StarConfig), check=check,
                    takes_checkpoint=False,
                    quick=Config(rounds=1, problems=20, samples=1, steps=2, eval_n=2), run_cost=40, render_cost=0.3,
                    tier="lesson"))
