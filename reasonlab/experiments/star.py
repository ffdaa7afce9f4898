"""STaR: sample, keep the outputs with the right answer, fine-tune, repeat.

The experiment runs `methods.star.train` once per variant (a row of VARIANTS: the filter, the sampling, restart or
continue, pooling, rationalization) from the base model or from a "few written chains" start, evaluates every
round's model greedily, and caches each round's model by what decides it, so that runs which keep the same data
share one fine-tune. The star_erring and faithful experiments run STaR through these pieces too.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Callable, Literal, get_args

import numpy as np

from ..core.config import GEN_ROW, fits
from ..core.evaluate import evaluate
from ..core.model import GPT
from ..core.problems import TEST_SEED, problems_per_k
from ..core.task import FMT_NAMES
from ..io.checkpoint import cache_key, fingerprint, weights_hash
from ..io.report import band, md_table, plt, save
from ..methods import star as star_method
from ..methods.config import StarConfig
from ..stats import findings
from ..stats.findings import UNTESTABLE, missing, seed_check
from ..stats.summary import pm
from ..train.sft import base_name
from ..train.zoo import get_model
from . import Experiment, register
from .thresholds import THRESHOLDS as TH

Variant = Literal["main", "chain", "greedy-1", "continue", "pool", "think", "think+chain", "think+rationalize",
                  "think+rationalize+chain"]
VARIANTS: dict[str, dict] = {
    "main": {},                                          # STaR: the answer filter, 4 samples at temperature 1
    "chain": {"filter": "chain"},                        # and every chain step checked (RFT's step check)
    "greedy-1": {"samples": 1, "temperature": 0.0},      # STaR's own sampling: one near-greedy sample
    "continue": {"restart": False},                      # fine-tune the last round's model, not the base
    "pool": {"pool": True},                              # train on the kept data of every round so far
    "think": {"force": "T"},                             # prompt for a rationale: sample with T forced
    "think+chain": {"force": "T", "filter": "chain"},
    "think+rationalize": {"force": "T", "rationalize": True},
    "think+rationalize+chain": {"force": "T", "rationalize": True, "filter": "chain"},
}
"""The variants of the STaR loop, each the StarConfig fields it sets: the ablations on the base model (greedy-1,
chain, continue, pool) and, for the few-chains start where chains can be wrong, forced T with the chain filter and
rationalization."""
assert set(VARIANTS) == set(get_args(Variant))


@dataclass
class Config:
    start: Literal["base", "few-chains"] = "base"
    """the base model, or one shown only n_chains worked chains (and the hint token, so rationalization can run)"""
    n_chains: int = 1000
    """worked chains the few-chains start sees"""
    variants: tuple[Variant, ...] = ("main", "chain")
    """the variants run, each its own run (see VARIANTS; "main" is STaR with the answer filter, and "chain" runs
    only where the answer filter's kept samples hold wrong chains to drop)"""
    rounds: int = 2
    """STaR rounds"""
    problems: int = 5000
    """fresh problems per round"""
    samples: int = 4
    """outputs sampled per problem (greedy-1: one)"""
    steps: int = 300
    """fine-tuning steps in round 1"""
    growth: float = 1.2
    """fine-tuning steps grow by this factor each round (STaR: +20 %)"""
    lr: float = 1e-3
    """fine-tuning learning rate (warmup 30 steps, cosine)"""
    eval_n: int = 300
    """greedy test problems per k for each round's evaluation"""

    def validate(self) -> None:
        bad = [v for v in self.variants if v not in VARIANTS]
        if bad or "main" not in self.variants:
            raise ValueError(f"star: variants must include main and be among {', '.join(VARIANTS)}"
                             + (f", got {bad[0]!r}" if bad else ""))
        hinted = [v for v in self.variants if VARIANTS[v].get("rationalize")]
        if hinted and self.start != "few-chains":
            raise ValueError(f"star: {hinted[0]} needs start few-chains (a start pre-trained with the hint token)")
        for v in self.variants:
            star_config(self, v, seed=0).validate()
        fits("problems", self.problems * self.samples, GEN_ROW, self.samples)     # each round samples every problem


def star_config(cfg: Config, variant: str, seed: int) -> StarConfig:
    """The STaR loop's settings for one variant (few chains: no worked chains in the fresh rows either)."""
    few = {"mix": (1.0, 0.0, 0.0)} if cfg.start == "few-chains" else {}
    return StarConfig(**{**dict(rounds=cfg.rounds, problems=cfg.problems, samples=cfg.samples, steps=cfg.steps,
                                growth=cfg.growth, lr=cfg.lr, seed=seed), **few, **VARIANTS[variant]})


_ROUND_EVALS: dict = {}


def evaluate_round(model: GPT, n_per_k: int = 300) -> dict:
    """Greedy accuracy per k, free and forced, and the free format shares. Memoized on the weights in this process:
    runs that share a model (the base, or a fine-tune two filters both trained) evaluate it once."""
    key = (weights_hash(model), n_per_k)
    if key not in _ROUND_EVALS:
        _ROUND_EVALS[key] = _evaluate_round(model, n_per_k)
    return copy.deepcopy(_ROUND_EVALS[key])


def _evaluate_round(model: GPT, n_per_k: int) -> dict:
    probs = problems_per_k(n_per_k, seed=TEST_SEED)
    free = evaluate(model, probs)
    out = {"free": free["acc"], "free_by_k": {k: v["acc"] for k, v in free["per_k"].items()},
           "share": free["share"], "share_by_k": {k: v["share"] for k, v in free["per_k"].items()}}
    for f in ("A", "S", "T"):
        r = evaluate(model, probs, force=[f])
        out[f] = r["acc"]
        out[f + "_by_k"] = {k: v["acc"] for k, v in r["per_k"].items()}
    return out


def cached_fine_tune(start: str, cache: str | None, progress: bool = False) -> Callable:
    """STaR's fine_tune through the model cache: round r's model is named by the start and by what decides it
    (recipe, kept data, init weights), not by the filter, so two runs that keep the same outputs train one model
    (on the base model the answer and chain filters keep identical data, every round: the second run is then read
    from the cache)."""
    def fine_tune(r: int, recipe: dict, init: GPT) -> GPT:
        name = f"star-{start}-r{r}-{fingerprint(cache_key(recipe, init))}"
        return get_model(name, recipe, log=None, init=init, cache=cache, device=str(next(init.parameters()).device),
                         progress=progress)
    return fine_tune


def star_rounds(model: GPT, start: str, sc: StarConfig, eval_n: int, cache: str | None,
                progress: bool = False) -> list[dict]:
    """STaR from `model` (cached as `start`), each round's model evaluated: one record per round, round 0 the
    start."""
    hist = [{"round": 0, **evaluate_round(model, eval_n)}]
    star_method.train(model, sc, cached_fine_tune(start, cache, progress),
                      callback=lambda rec, m: hist.append({**rec, **evaluate_round(m, eval_n)}))
    return hist


def start_model(cfg: Config, seed: int, env) -> tuple[GPT, str]:
    """The model STaR starts from and its name in the cache."""
    if cfg.start == "base":
        return env.base(seed), base_name(seed, env.quick)
    if env.checkpoint is not None:
        raise ValueError("star: start few-chains trains its own start; a checkpoint would be ignored")
    name = f"few-chains-seed{seed}-n{cfg.n_chains}"
    return get_model(name, star_method.few_chains_cfg(seed, cfg.n_chains), log=None, cache=env.cache,
                     device=env.device, progress=True), name


def run(cfg: Config, seed: int, env) -> dict:
    """"main" first; "chain" only where it would keep other data: where main's kept samples hold fewer
    right-answer-wrong-chain samples than the design bound, the two filters train on the same data and the
    comparison is untestable, so it is not run."""
    model, start = start_model(cfg, seed, env)
    out = {}
    for v in sorted(cfg.variants, key=lambda v: v != "main"):
        if v == "chain" and "main" in out and max(r.get("false_positive_rate", 0.0) for r in out["main"]
                                                  ) < TH["star.filter_room"].value:
            continue
        out[v] = star_rounds(model, start, star_config(cfg, v, seed), cfg.eval_n, env.cache, progress=True)
    return out


def star_raises_free_accuracy(star: list[dict], variant: str = "main") -> dict:
    gain = [r[variant][-1]["free"] - r[variant][0]["free"] for r in star]
    n = len(star[0][variant]) - 1
    return seed_check("5 STaR", f"STaR raises free accuracy ({n} round(s), answer filter)",
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


def star_table(runs: dict[str, list[list[dict]]]) -> str:
    """STaR per round, one row per (variant, round), mean ± std over the seeds of each variant."""
    fmts = FMT_NAMES
    rows = []
    for vname, hists in runs.items():
        for i in range(len(hists[0])):
            hs = [h[i] for h in hists]

            def ms(key, sub=None, f="{:.3f}"):
                return pm([h[key] if sub is None else h[key][sub] for h in hs], f)
            row = [vname, i if i else "0 (base)", ms("free"), " / ".join(ms(x, f="{:.2f}") for x in "AST"),
                   " / ".join(ms("share", f, "{:.2f}") for f in fmts)]
            if i == 0:
                rows.append(row + [""] * 5)
                continue
            rows.append(row + [ms("used", f="{:.2f}"), " / ".join(ms("fmt_mix", f, "{:.2f}") for f in fmts),
                               ms("false_positive_rate"), ms("rationalized", f="{:.2f}"), ms("round_s", f="{:.1f}")])
    return md_table(["variant", "round", "free acc", "forced A / S / T", "free share A / S / T", "used",
                     "kept A / S / T", "right answer, wrong chain", "kept via hint", "round s"], rows)


def plot_star(runs: dict[str, list[list[dict]]], path: str) -> str:
    """Per variant: free accuracy per k over rounds (mean over seeds), share of problems used, kept format mix."""
    fig, axes = plt.subplots(1, 3, figsize=(16, 3.8))
    for name, hists in runs.items():
        rounds = [h["round"] for h in hists[0]]
        acc = np.array([[h["free"] for h in hist] for hist in hists])
        line = band(axes[0], rounds, acc, marker="o", label=name)
        used = np.array([[h.get("used", np.nan) for h in hist[1:]] for hist in hists])
        axes[1].plot(rounds[1:], used.mean(0), marker="o", color=line.get_color(), label=name)
    first = next(iter(runs.values()))
    ks = list(first[0][-1]["free_by_k"])
    for k in ks:
        axes[2].plot([h["round"] for h in first[0]], [np.mean([hist[i]["free_by_k"][k] for hist in first])
                                                      for i in range(len(first[0]))], marker=".", label=f"k={k}")
    axes[0].axhline(0.1, color="grey", ls=":", lw=1, label="chance")
    axes[0].set_title("free-format greedy accuracy (k = 2..8)")
    axes[1].set_title("share of problems that yield data")
    axes[2].set_title(f"free accuracy per k, {next(iter(runs))}")
    axes[2].axhline(0.1, color="grey", ls=":", lw=1)
    for ax in axes:
        ax.set_xlabel("round")
    axes[0].legend(fontsize=7)
    axes[2].legend(fontsize=6, ncol=2)
    return save(fig, path)


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    hists = [r["main"] for r in rs]
    variants = {v: [r[v] for r in rs] for v in rs[0]}
    plot_star(variants, os.path.join(out, "star", "star.png"))
    head = f"free accuracy {pm([h[0]['free'] for h in hists])} → {pm([h[-1]['free'] for h in hists])} in {len(hists[0]) - 1} round(s)"
    md = f"""## STaR: the model teaches itself to think

> **Question.** Sample from the model, keep the outputs with the right answer, fine-tune the base on them, repeat.
> Does free-format accuracy rise as the kept data favour the chains that are right?

![STaR rounds](star/star.png)

{star_table(variants)}

4 samples per problem at temperature 1, each round fine-tuned from the base model; mean ± std over seeds. Only
complete templates with the right answer are kept; "right answer, wrong chain" (STaR's false positive, exactly
measurable here) is the share of those chains with a wrong step. {findings.verdict_line(star_raises_free_accuracy(rs))}
{findings.verdict_line(chain_filter_vs_answer_filter(rs))}

*Papers:* STaR (Zelikman et al. 2022, arXiv 2203.14465); RFT (Yuan et al. 2023, arXiv 2308.01825); ReST-EM (Singh
et al. 2023, arXiv 2312.06585).
*Explore:* `reasonlab star --variants main greedy-1 chain continue pool` (the ablations);
`reasonlab star --start few-chains --variants main think think+chain think+rationalize` (a start that saw few chains).
"""
    return [(md, head)]


register(Experiment("star", Config, run, claims, render, keys=("main",),
                    quick=Config(rounds=1, problems=400, steps=40, eval_n=30), run_cost=45, render_cost=0.5))
