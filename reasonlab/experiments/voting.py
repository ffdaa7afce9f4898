"""Self-consistency needs errors that vary: majority voting on a thinker whose misreadings are fixed in its weights
against one whose misreadings are drawn afresh for every sample (Wang et al. 2022, "Self-Consistency Improves Chain
of Thought Reasoning in Language Models", arXiv 2203.11171: sample several chains, take the most frequent answer).

The lab's erring thinker reads the digits through one noise direction fixed in its embeddings: a problem it misreads
it misreads in every sample, so a vote repeats the error. The per-sample thinker reads through a fresh direction in
each sample (sample j decodes with the base model misread by draw j), at a noise scale calibrated, like the erring
thinker's, so that greedy forced S at k = 8 is right on 45 % of probe problems on average over draws. Both write
forced S chains at temperature 1; greedy is one greedy decode (the per-sample thinker's: draw 0).
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass

import numpy as np
import torch

from ..core.evaluate import evaluate
from ..core.model import GPT
from ..core.pool import pool_of, sample_pool
from ..core.problems import TEST_SEED, problems_per_k
from ..core.sampling import generate
from ..core.task import prompt_ids
from ..io.report import plt, save
from ..methods.tts import majority
from ..stats import findings as F
from ..stats.summary import pm
from ..train.sft import ERR_CFG, misread
from ..train.zoo import thinker_model
from . import Experiment, register
from .thresholds import THRESHOLDS as TH

NS = (1, 2, 4, 8, 16, 32, 64)
DRAW0 = 10_000
"""per-sample draws start here (seed s uses DRAW0 * (s + 1) + j), away from the erring thinker's own direction"""


@dataclass
class Config:
    n: int = 100
    """test problems per k"""
    samples: int = 64
    """samples per problem (the largest N voted over)"""
    calib_draws: int = 4
    """noise draws averaged per bisection step when calibrating the per-sample thinker"""


def reader(base: GPT, sigma: float, draw: int) -> GPT:
    """The base model reading its digits through noise draw `draw` at scale sigma (train.sft.misread)."""
    return misread(copy.deepcopy(base), sigma, draw)


def calibrate(base: GPT, seed: int, draws: int) -> float:
    """The noise scale at which greedy forced S at k = 8 is right on ERR_CFG's share of its probe, on average over
    `draws` draws (bisection, as the erring thinker's calibration)."""
    m = ERR_CFG["misread"]
    probe = problems_per_k(m["n"], seed=m["probe_seed"], ks=[m["k"]])
    lo, hi = 0.0, 1.0
    for _ in range(m["iters"]):
        mid = (lo + hi) / 2
        acc = np.mean([evaluate(reader(base, mid, DRAW0 * (seed + 1) + j), probe, force=[m["format"]])["acc"]
                       for j in range(draws)])
        lo, hi = (mid, hi) if acc >= m["acc"] else (lo, mid)
    return lo


def curve(pool, greedy: float) -> dict:
    return {"greedy": greedy, "majority": {N: float(majority(pool, N).mean()) for N in NS if N <= pool.n}}


def run(cfg: Config, seed: int, env) -> dict:
    probs = problems_per_k(cfg.n, seed=TEST_SEED + seed, split="test")
    fixed = thinker_model("erring", seed, env.cache, env.device)
    out = {"fixed": curve(sample_pool(fixed, probs, cfg.samples, force=["S"], seed=seed),
                          evaluate(fixed, probs, force=["S"])["acc"])}
    base = env.base(seed)
    sigma = calibrate(base, seed, cfg.calib_draws)
    gen = torch.Generator().manual_seed(seed)
    prompts = [prompt_ids(d) for d in probs]
    outs = [generate(reader(base, sigma, DRAW0 * (seed + 1) + j), prompts, gen, 1.0, force=["S"])
            for j in range(cfg.samples)]
    pool = pool_of(probs, [[outs[j][i] for j in range(cfg.samples)] for i in range(len(probs))])
    greedy = evaluate(reader(base, sigma, DRAW0 * (seed + 1)), probs, force=["S"])["acc"]
    out["per_sample"] = {**curve(pool, greedy), "sigma": sigma}
    return out


def gain(r: dict, arm: str) -> float:
    top = max(r[arm]["majority"])
    return r[arm]["majority"][top] - r[arm]["greedy"]


def claims(rs: list[dict]) -> list[dict]:
    top = max(rs[0]["fixed"]["majority"])
    sec = "15 voting"
    return [F.seed_check(sec, f"With errors drawn per sample, majority@{top} beats greedy by more than 5 points",
                         f"acc(majority@{top}) - acc(greedy), per-sample thinker", [gain(r, "per_sample") for r in rs],
                         TH["sampling.vote_margin"], control="greedy"),
            F.seed_check(sec, "Voting gains more when the errors are drawn per sample than when they are fixed in the "
                         "weights", "gain(per-sample) - gain(fixed)", [gain(r, "per_sample") - gain(r, "fixed")
                                                                       for r in rs], TH["voting.varies"],
                         control="the fixed-error thinker"),
            F.seed_check(sec, f"With errors fixed in the weights, majority@{top} beats greedy by more than 5 points",
                         f"acc(majority@{top}) - acc(greedy), erring thinker", [gain(r, "fixed") for r in rs],
                         TH["sampling.vote_margin"], control="greedy")]


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    fig, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
    for arm, label, c in (("fixed", "errors fixed in the weights (erring thinker)", "#4C72B0"),
                          ("per_sample", "errors drawn per sample", "#C44E52")):
        Ns = sorted(rs[0][arm]["majority"])
        y = np.array([[r[arm]["majority"][N] for N in Ns] for r in rs])
        ax.plot(Ns, y.mean(0), marker="o", ms=3, color=c, label=f"majority@N, {label}")
        ax.fill_between(Ns, y.min(0), y.max(0), color=c, alpha=0.15)
        ax.axhline(np.mean([r[arm]["greedy"] for r in rs]), color=c, ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N samples (forced S, temperature 1)")
    ax.set_ylabel("accuracy (all k)")
    ax.set_title("dotted: greedy")
    ax.legend(fontsize=8)
    save(fig, os.path.join(out, "voting", "majority.png"))
    fs = claims(rs)
    top = max(rs[0]["fixed"]["majority"])
    rows = ["| thinker | greedy | majority@" + str(top) + " | gain |", "|---|---|---|---|"]
    for arm, label in (("fixed", "errors fixed (erring thinker)"), ("per_sample", "errors per sample")):
        rows.append(f"| {label} | {pm([r[arm]['greedy'] for r in rs])} | "
                    f"{pm([r[arm]['majority'][top] for r in rs])} | {pm([gain(r, arm) for r in rs])} |")
    head = (f"majority@{top} - greedy: fixed errors {pm([gain(r, 'fixed') for r in rs])}, per-sample errors "
            f"{pm([gain(r, 'per_sample') for r in rs])}")
    md = f"""## 15. Self-consistency needs errors that vary

> **Question.** Majority voting rescues a thinker whose samples err independently. What if its errors are fixed:
> the same misreading in every sample?

![majority voting](voting/majority.png)

{chr(10).join(rows)}

Forced S chains on the test problems; the per-sample thinker's noise scale is
calibrated to the erring thinker's accuracy (σ = {pm([r['per_sample']['sigma'] for r in rs], '{:.3f}')}); mean ±
std over seeds. {" ".join(F.verdict_line(f) for f in fs)}

*Paper:* Wang et al. 2022, "Self-Consistency Improves Chain of Thought Reasoning in Language Models" (arXiv
2203.11171).
*Explore:* `reasonlab lab --only voting`; `voting.reader(base, sigma, draw)` is one sample's misreading model.
"""
    return [(md, head)]


def check(result) -> None:
    if any(arm not in result or "majority" not in result[arm] or "greedy" not in result[arm]
           for arm in ("fixed", "per_sample")):
        raise ValueError("a voting result needs fixed and per_sample, each with greedy and majority@N")


register(Experiment("voting", Config, run, claims, render, check=check, quick=Config(n=5, samples=4, calib_draws=1),
                    run_cost=40, render_cost=0.3, tier="lesson"))
