"""Process labels, measured: how often Math-Shepherd's Monte-Carlo step labels (Wang et al. 2023, arXiv 2312.08935)
disagree with the exact ones, by the number of rollouts.

Math-Shepherd labels a step by rolling the thinker out from it: the hard estimate says the step is right when any
of R rollouts reaches the right answer. Here every step can be checked (`verifier.oracle_labels`), so its false
positives (a wrong step whose rollouts still reach the answer: the thinker errs again and lands on it) and false
negatives (a right step whose rollouts all go wrong) are counted exactly, on the erring thinker's own S chains. The
rollouts of a step are the first R of 16, so the rates for every R come from one set of samples.

Then what the noise costs: three PRMs trained on the thinker's S chains, one on the exact step labels and two on
Math-Shepherd's rollout labels (`prm-mc`, the soft estimate: the share of rollouts that reach the answer, the hard
one at R = 1) at 1 and 8 rollouts, each scored on fresh S samples of the run's test problems: the step AUROC against
the exact labels (chain steps) and best-of-N accuracy with Math-Shepherd's min aggregation, beside majority voting
over the same samples (the policy without a verifier).
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
from ..io.report import md_table, plt, save
from ..methods.config import VerifierConfig
from ..methods.search import best_of_n
from ..methods.tts import majority
from ..methods.verifier import aggregate, auroc, oracle_labels, steps, train_verifier
from ..stats import findings
from ..stats.summary import pm
from ..train.zoo import on_erring, thinker_model
from . import Experiment, register
from .thresholds import THRESHOLDS as TH

ROLLOUTS = (1, 2, 4, 8, 16)
PRMS = {"exact": ("prm", 1), "mc1": ("prm-mc", 1), "mc8": ("prm-mc", 8)}   # name: (verifier kind, rollouts)
SHOWN = {"exact": "the exact labels", "mc1": "Math-Shepherd's, 1 rollout", "mc8": "Math-Shepherd's, 8 rollouts"}


@dataclass
class Config:
    n: int = 100
    """test problems per k (one sampled S chain each; every step before the answer is labelled)"""
    prm_n: int = 200
    """training problems per k for each PRM (two S chains each, from the verifiers' training part of the space)"""
    best_of: int = 16
    """S samples per test problem that each PRM scores (step AUROC, best-of-N) and majority voting reads"""

    def validate(self) -> None:
        if self.best_of < 1:
            raise ValueError(f"best_of must be >= 1, got {self.best_of}")


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
    return {"cells": cells, "steps": len(todo), **prm_costs(thinker, probs, cfg, seed, env.cache)}


def prm_costs(thinker, probs, cfg: Config, seed: int, cache) -> dict:
    """Each PRM of PRMS trained on the thinker, then read on best_of fresh S samples per test problem: chain-step
    AUROC against the exact labels and best-of-N accuracy (min over the step scores); majority@N and a single
    sample's accuracy over the same samples."""
    N = cfg.best_of
    pool = sample_pool(thinker, probs, N, ["S"], 1.0, seed=10_000 + seed, keep_outputs=True)
    digs, outs = pool.flat()
    chain = np.array([not a for o in outs for _, _, a in steps(o)])
    exact = np.array([x for d, o in zip(digs, outs) for x in oracle_labels(d, o)])[chain]
    prm = {}
    for name, (kind, R) in PRMS.items():
        vc = VerifierConfig(kind=kind, n_per_k=cfg.prm_n, rollouts=R, formats=("S",), format_weights=(1.0,))
        v = train_verifier(kind, thinker, seed, vc, cache=cache, log=None)
        sc = v.score_steps(digs, outs)
        flat = np.array([x for r in sc for x in r])[chain]
        prm[name] = {"auroc": auroc(flat, exact),
                     "bon": float(best_of_n(pool, aggregate(sc, "min").reshape(len(probs), N), N).mean())}
    return {"prm": prm, "majority": float(majority(pool, N).mean()), "single": float(pool.correct.mean()),
            "wrong_chain_steps": int((exact == 0).sum()), "best_of": N, "prm_n": cfg.prm_n}


def rate(r: dict, exact: int, rollouts: int, k: int | None = None) -> float:
    """The share of steps with this exact label whose hard estimate over `rollouts` says "right": the false-positive
    rate for exact = 0, the true-positive rate for exact = 1."""
    cs = [c for kl, c in r["cells"].items()
          if int(kl.split("/")[1]) == exact and (k is None or int(kl.split("/")[0]) == k)]
    return sum(c[f"any{rollouts}"] for c in cs) / max(1, sum(c["n"] for c in cs))


def count(r: dict, exact: int) -> int:
    return sum(c["n"] for kl, c in r["cells"].items() if int(kl.split("/")[1]) == exact)


def claims(rs: list[dict]) -> list[dict]:
    lo, hi = min(ROLLOUTS), max(ROLLOUTS)
    fp = [rate(r, 0, hi) - rate(r, 0, lo) for r in rs]
    fn = [(1 - rate(r, 1, lo)) - (1 - rate(r, 1, hi)) for r in rs]
    no_wrong = "no wrong steps to label: the thinker's chains are all right" \
        if min(count(r, 0) for r in rs) == 0 else None
    no_right = "no right steps to label" if min(count(r, 1) for r in rs) == 0 else None
    sec = "11 labels"
    return [findings.seed_check(sec, f"More rollouts make Math-Shepherd's hard labels pass more wrong steps: the false-"
                         f"positive rate rises from {lo} to {hi} rollouts", f"FP({hi}) - FP({lo})", fp,
                         TH["labels.fp_rise"], untestable=no_wrong),
            findings.seed_check(sec, f"More rollouts miss fewer right steps: the false-negative rate falls from {lo} to "
                         f"{hi} rollouts", f"FN({lo}) - FN({hi})", fn, TH["labels.fn_fall"], untestable=no_right),
            findings.seed_check(sec, "At 8 rollouts (Math-Shepherd's N) more than 5 % of wrong steps are labelled right",
                         "FP(8)", [rate(r, 0, 8) for r in rs], TH["labels.fp_level"], untestable=no_wrong),
            *prm_claims(rs)]


def prm_claims(rs: list[dict]) -> list[dict]:
    N = rs[0]["best_of"]
    none = "no wrong chain step among the scored samples: the AUROC is undefined" \
        if min(r["wrong_chain_steps"] for r in rs) == 0 else None
    at = lambda name, key: [r["prm"][name][key] for r in rs]                          # noqa: E731
    d = lambda a, b, key: [x - y for x, y in zip(at(a, key), at(b, key))]              # noqa: E731
    return [findings.seed_check("11 labels", "A PRM trained on the exact step labels ranks steps better than one trained on "
                         "Math-Shepherd's labels at 8 rollouts (step AUROC against the exact labels)",
                         "AUROC(exact) - AUROC(MC, 8)", d("exact", "mc8", "auroc"), TH["labels.prm_noise"],
                         untestable=none),
            findings.seed_check("11 labels", "Noisier labels train a worse PRM: 8 rollouts rank steps better than 1",
                         "AUROC(MC, 8) - AUROC(MC, 1)", d("mc8", "mc1", "auroc"), TH["labels.prm_rollouts"],
                         untestable=none),
            findings.seed_check("11 labels", f"The label noise reaches the answer: best-of-{N} with the exact-label PRM beats "
                         f"best-of-{N} with the 8-rollout one", "BoN(exact) - BoN(MC, 8)", d("exact", "mc8", "bon"),
                         TH["labels.prm_label_bon"]),
            findings.seed_check("11 labels", "The 8-rollout PRM still beats majority voting over the same samples (the policy "
                         "without a verifier)", f"BoN(MC, 8) - maj@{N}",
                         [r["prm"]["mc8"]["bon"] - r["majority"] for r in rs], TH["labels.prm_bon"])]


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    for exact, name in ((0, "false positives (wrong step labelled right)"),
                        (1, "false negatives (right step labelled wrong)")):
        y = np.array([[rate(r, 0, R) if exact == 0 else 1 - rate(r, 1, R) for R in ROLLOUTS] for r in rs])
        ax.errorbar(ROLLOUTS, y.mean(0), yerr=y.std(0), marker="o", ms=3, capsize=2, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("rollouts per step (the hard estimate: any reaches the answer)")
    ax.set_ylabel("rate")
    ax.legend(fontsize=8)
    save(fig, os.path.join(out, "labels", "rates.png"))
    rates = md_table(["rollouts", "false positives", "false negatives"],
                     [[R, pm([rate(r, 0, R) for r in rs]), pm([1 - rate(r, 1, R) for r in rs])] for R in ROLLOUTS])
    prms = md_table(["PRM trained on", "chain-step AUROC", "best-of-N"],
                    [[SHOWN[name], pm([r["prm"][name]["auroc"] for r in rs]), pm([r["prm"][name]["bon"] for r in rs])]
                     for name in PRMS]
                    + [["(none: majority voting)", "–", pm([r["majority"] for r in rs])],
                       ["(none: one sample)", "–", pm([r["single"] for r in rs])]])
    fs = claims(rs)
    head = f"FP {pm([rate(r, 0, 8) for r in rs])}, FN {pm([1 - rate(r, 1, 8) for r in rs])} at 8 rollouts"
    md = f"""## Process labels, measured: Math-Shepherd's rollouts against the exact labels

> **Question.** Math-Shepherd labels a step right when a rollout from it reaches the answer. How often is that
> label wrong, and how does the number of rollouts move the errors?

![label error rates](labels/rates.png)

{rates}

The erring thinker's sampled S chains ({rs[0]['steps']} steps before the answer per seed), 16 rollouts per step at
temperature 1; mean ± std over seeds.

What the noise costs a PRM: each trained on two S chains per problem ({rs[0]['prm_n']} problems per k), read
on fresh S samples of the test problems (best-of-{rs[0]['best_of']} with the min over step scores):

{prms}

{" ".join(findings.verdict_line(f) for f in fs)}

*Paper:* Math-Shepherd (Wang et al. 2023, arXiv 2312.08935).
*Explore:* `reasonlab labels --best-of 64`; `methods.verifier.train_verifier` with `VerifierConfig(kind="prm-mc",
rollouts=2)` trains a PRM on them.
"""
    return [(md, head)]


def check(result) -> None:
    if not isinstance(result.get("cells"), dict) or not isinstance(result.get("prm"), dict) \
            or set(result["prm"]) != set(PRMS):
        raise ValueError("a labels result needs its cells and each PRM's AUROC and best-of-N")


register(Experiment("labels", Config, run, claims, render, depends=on_erring(VerifierConfig), check=check, takes_checkpoint=False,
                    quick=Config(n=3, prm_n=3, best_of=2), run_cost=20, render_cost=0.5, tier="lesson"))
