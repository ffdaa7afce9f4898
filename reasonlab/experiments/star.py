"""5. STaR: sample, keep the outputs with the right answer, fine-tune, repeat."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Literal

from ..core.config import GEN_ROW, STEPS_MAX, fits
from ..io import report
from ..methods import star as star_method
from ..stats import findings
from ..stats.findings import UNTESTABLE, missing, seed_check
from ..stats.summary import pm
from ..train.sft import base_name
from . import Experiment, register
from .thresholds import THRESHOLDS as TH


@dataclass
class Config:
    rounds: int = 2
    """STaR rounds"""
    problems: int = 5000
    """fresh problems per round"""
    steps: int = 300
    """fine-tuning steps in round 1"""
    eval_n: int = 300
    """greedy test problems per k for each round's evaluation"""
    filters: tuple[Literal["answer", "chain", "none"], ...] = ("answer", "chain")
    """filters compared, each its own run ("main" is the answer filter)"""

    def validate(self) -> None:
        if len(set(self.filters)) < len(self.filters) or "answer" not in self.filters or \
                not set(self.filters) <= {"answer", "chain", "none"}:
            raise ValueError(f"filters must be distinct ones of answer, chain, none, answer among them (the claims "
                             f"read its run), got {' '.join(map(str, self.filters)) or 'none'}")
        growth, samples = star_method.StarConfig.growth, star_method.StarConfig.samples
        if math.log(self.steps) + (self.rounds - 1) * math.log(growth) > math.log(STEPS_MAX):   # no float overflow
            raise ValueError(f"rounds: {self.rounds} rounds of {self.steps} steps growing by {growth:g} a round "
                             f"end past {STEPS_MAX:,} steps")
        fits("problems", self.problems * samples, GEN_ROW, samples)     # each round samples every problem


def run(cfg: Config, seed: int, env) -> dict:
    """The answer filter first; the chain filter only where it would keep other data: where the answer filter's
    kept samples hold fewer right-answer-wrong-chain samples than the design bound, the two filters train on the
    same data and the comparison is untestable, so it is not run."""
    model = env.base(seed)
    out = {}
    for f in sorted(cfg.filters, key=lambda f: f != "answer"):
        if f == "chain" and "main" in out and max(r.get("false_positive_rate", 0.0) for r in out["main"]
                                                  ) < TH["star.filter_room"].value:
            continue
        sc = star_method.StarConfig(rounds=cfg.rounds, problems=cfg.problems, steps=cfg.steps, seed=seed, filter=f,
                                    eval_n=cfg.eval_n)
        out["main" if f == "answer" else f] = star_method.run(model, base_name(seed, env.quick), sc, log=None,
                                                               cache=env.cache, progress=True)
    return out


def star_raises_free_accuracy(star: list[dict], variant: str = "main") -> dict:
    gain = [r[variant][-1]["free"] - r[variant][0]["free"] for r in star]
    rounds = len(star[0][variant]) - 1
    return seed_check("5 STaR", f"STaR raises free accuracy ({rounds} round(s), answer filter)",
                      "free acc after the last round - free acc of the base", gain, TH["star.gain"])


def chain_filter_vs_answer_filter(star: list[dict]) -> dict:
    """The chain filter (answer and every step right) against the answer filter, same rounds: final free
    accuracy. A claim that the step check matters needs this difference above zero."""
    fp = [max(x.get("false_positive_rate", 0.0) for x in r["main"]) for r in star]
    room = TH["star.filter_room"].value
    claim = "The chain filter (every step checked) beats the answer filter in final free accuracy"
    same = (f"no variance by construction: the filters disagree on {max(fp):.4f} of the kept samples at most (right "
            f"answers with wrong chains), under {room:g}") if max(fp) < room else None
    if any("chain" not in r for r in star):
        if same is None:
            return missing("5 STaR", claim, "needs the chain-filter variant")
        return dict(missing("5 STaR", claim, "not run: the two filters would keep the same data"), verdict=UNTESTABLE,
                    untestable=same, false_positive_rate=fp)
    diff = [r["chain"][-1]["free"] - r["main"][-1]["free"] for r in star]
    return seed_check("5 STaR", claim, "free acc(chain filter) - free acc(answer filter), last round", diff,
                      TH["star.filter_gain"], untestable=same, false_positive_rate=fp)



def claims(rs: list[dict]) -> list[dict]:
    return [star_raises_free_accuracy(rs), chain_filter_vs_answer_filter(rs)]


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    hists = [r["main"] for r in rs]
    variants = {v: [r[v] for r in rs] for v in rs[0]}
    report.plot_star(variants, os.path.join(out, "star", "star.png"))
    head = f"free accuracy {pm([h[0]['free'] for h in hists])} → {pm([h[-1]['free'] for h in hists])} in {len(hists[0]) - 1} round(s)"
    md = f"""## STaR: the model teaches itself to think

> **Question.** Sample from the model, keep the outputs with the right answer, fine-tune the base on them, repeat.
> Does free-format accuracy rise as the kept data favour the chains that are right?

![STaR rounds](star/star.png)

{report.star_table(variants)}

4 samples per problem at temperature 1, each round fine-tuned from the base model; mean ± std over seeds. Only
complete templates with the right answer are kept; "right answer, wrong chain" (STaR's false positive, exactly
measurable here) is the share of those chains with a wrong step. {findings.verdict_line(star_raises_free_accuracy(rs))}
{findings.verdict_line(chain_filter_vs_answer_filter(rs))}

*Papers:* STaR (Zelikman et al. 2022, arXiv 2203.14465); RFT (Yuan et al. 2023, arXiv 2308.01825); ReST-EM (Singh
et al. 2023, arXiv 2312.06585).
*Explore:* `reasonlab star --ablations` (greedy single sample, chain filter, continue, pooling).
"""
    return [(md, head)]



register(Experiment("star", Config, run, claims, render, keys=("main",),
                    quick=Config(rounds=1, problems=400, steps=40, eval_n=30), run_cost=45, render_cost=0.5))
