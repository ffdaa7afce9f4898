"""Process labels, measured: how often Math-Shepherd's Monte-Carlo step labels (Wang et al. 2023, arXiv 2312.08935)
disagree with the exact ones, by the number of rollouts.

Math-Shepherd labels a step by rolling the thinker out from it: the hard estimate says the step is right when any
of R rollouts reaches the right answer. Here every step can be checked (`verifier.oracle_labels`), so its false
positives (a wrong step whose rollouts still reach the answer: the thinker errs again and lands on it) and false
negatives (a right step whose rollouts all go wrong) are counted exactly, on the erring thinker's own S chains. The
rollouts of a step are the first R of 16, so the rates for every R come from one set of samples.

That FP(16) >= FP(1) and FN(16) <= FN(1) holds on every seed by construction (any of 16 rollouts reaching the
answer includes the first one doing so): these are premises, not findings.

The open question, the primary claim, is what the noise costs a PRM: three PRMs trained on the same S chains of the
thinker, one on the exact step labels as PRM800K labels (up to the first wrong step: `prm`) and two on
Math-Shepherd's rollout labels (`prm-mc`, the soft estimate: the share of rollouts that reach the answer, the hard
one at R = 1) at 1 and 8 rollouts, each scored on fresh S samples of the run's test problems: the chain-step AUROC
against the exact labels, on the steps up to each chain's first error (what PRM800K labels, and all a weakest-step
score reads), and best-of-N accuracy with Math-Shepherd's min aggregation (through the search experiment's scorer),
beside majority voting over the same samples (the policy without a verifier). The control is the 8-rollout PRM; the
placebo trains the treatment PRM on the control's labels, on problems and rollouts of its own: a second control PRM.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import torch

from .. import tasks
from ..core.config import Count, NTest
from ..core.pool import sample_pool
from ..core.problems import test_problems
from ..core.sampling import generate_n
from ..core.seeds import hashed_seed
from ..io.report import md_table, plt, save
from ..methods.config import VerifierConfig
from ..methods.search import Scorer, best_of_n
from ..methods.tts import majority
from ..methods.verifier import first_error, oracle_labels, steps, train_verifier
from ..methods.verifier_quality import auroc
from ..stats import findings
from ..stats.summary import pm
from ..train.zoo import on_erring, thinker_model
from . import Experiment, opening, reading, register, replicate_seed
from .search import no_fall
from .thresholds import THRESHOLDS as TH

ROLLOUTS = (1, 2, 4, 8, 16)
PRMS = {"exact": ("prm", 1), "mc1": ("prm-mc", 1), "mc8": ("prm-mc", 8)}   # name: (verifier kind, rollouts)
SHOWN = {"exact": "the exact labels (up to the first error)", "mc1": "Math-Shepherd's, 1 rollout",
         "mc8": "Math-Shepherd's, 8 rollouts"}
SEC = "labels"
"""the findings' section tag"""


@dataclass
class Config:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    n_test: NTest = 100
    """test problems per k (one sampled S chain each; every step before the answer is labelled)"""
    n_train: Count = 200
    """training problems per k for each PRM (two S chains each, from the verifiers' training part of the space)"""
    best_of: Count = 16
    """S samples per test problem that each PRM scores (step AUROC, best-of-N) and majority voting reads"""
    treatment: Literal["prm", "prm-mc"] = "prm"
    """the labels of the treatment PRM ("exact"): the rule's, up to the first error ("prm"), or Math-Shepherd's at 8
    rollouts ("prm-mc"), the control's own, trained again on draws of its own (the primary's placebo)"""


def run(cfg: Config, seed: int, env) -> dict:
    task = tasks.get(cfg.task)
    thinker = thinker_model("erring", seed, env.cache, env.device, task=task)
    probs = test_problems(cfg.n_test, "labels", seed, task=task)
    pool = sample_pool(thinker, probs, 1, ["S"], 1.0, seed=hashed_seed(SEC, seed, "chains"), keep_outputs=True)
    todo = []                                               # (k, exact label, rollout prompt, answer)
    for p, (out,) in zip(probs, pool.outputs):
        exact = oracle_labels(p, out)
        for (i, _, is_answer), lab in zip(steps(out, task), exact):
            if not is_answer:
                todo.append((p.k, lab, task.prompt_ids(p) + out[:i + 1], task.answer(p)))
    gen = torch.Generator().manual_seed(hashed_seed(SEC, seed, "rollouts"))
    hits: list[list[bool]] = [[] for _ in todo]
    by_len: dict[int, list[int]] = {}
    for j, t in enumerate(todo):
        by_len.setdefault(len(t[2]), []).append(j)
    R = max(ROLLOUTS)
    for idx in by_len.values():
        outs = generate_n(thinker, [todo[j][2] for j in idx], R, gen, 1.0)
        for a, j in enumerate(idx):
            prefix = todo[j][2][task.prompt_len:]
            hits[j] = [task.parse(prefix + o)["answer"] == todo[j][3] for o in outs[a * R:(a + 1) * R]]
    cells = {}
    for (k, lab, _, _), h in zip(todo, hits):
        c = cells.setdefault(f"{k}/{int(lab)}", {"n": 0, **{f"any{r}": 0 for r in ROLLOUTS}})
        c["n"] += 1
        for r in ROLLOUTS:
            c[f"any{r}"] += any(h[:r])
    return {"cells": cells, "steps": len(todo), **prm_costs(thinker, probs, cfg, seed, env.cache)}


def prms(cfg: Config) -> dict[str, tuple[str, int]]:
    """Each PRM's (verifier kind, rollouts): the treatment's labels as the config says, the controls' fixed."""
    return {**PRMS, "exact": (cfg.treatment, 8 if cfg.treatment == "prm-mc" else 1)}


def prm_seed(cfg: Config, name: str, seed: int) -> int:
    """The seed a PRM trains on (its problems and rollouts): the seed's own, but the placebo's treatment PRM (the
    control's labels) trains on draws of its own, `replicate_seed`'s, so that it is an independent replicate."""
    return replicate_seed(seed) if name == "exact" and cfg.treatment == "prm-mc" else seed


def to_first_error(problems, outs) -> tuple[np.ndarray, np.ndarray]:
    """Over every step of every output (in order): whether it is a chain step up to and including its output's
    first wrong step (the steps PRM800K labels; answer steps left out), and its exact label."""
    problems = tasks.problems_of(problems)
    keep, exact = [], []
    for p, o in zip(problems, outs):
        lab = oracle_labels(p, o)
        upto = len(first_error(lab))
        keep += [not a and j < upto for j, (_, _, a) in enumerate(steps(o, tasks.task_of(p)))]
        exact += lab
    return np.array(keep, dtype=bool), np.array(exact)


def prm_costs(thinker, probs, cfg: Config, seed: int, cache) -> dict:
    """Each PRM of prms(cfg) trained on the thinker (under the placebo the treatment PRM is the control's, trained
    again on problems and rollouts of its own: `prm_seed`), then read on best_of fresh S samples per test problem:
    the chain-step AUROC against the exact labels, on the steps up to each chain's first error, and best-of-N
    accuracy (min over the step scores, through the search experiment's scorer); majority@N, the first sample's
    accuracy (best-of-1) and a single sample's over the same samples."""
    N = cfg.best_of
    pool = sample_pool(thinker, probs, N, ["S"], 1.0, seed=hashed_seed(SEC, seed, "best-of-n"),
                       keep_outputs=True)
    ps, outs = pool.flat()
    keep, exact = to_first_error(ps, outs)
    prm = {}
    for name, (kind, R) in prms(cfg).items():
        vc = VerifierConfig(kind=kind, n_train=cfg.n_train, rollouts=R, formats=("S",), format_weights=(1.0,))
        sc = Scorer(train_verifier(kind, thinker, prm_seed(cfg, name, seed), vc, cache=cache, log=None,
                                   task=cfg.task))
        flat = np.array([x for r in sc.steps(ps, outs) for x in r])
        scores = sc.values(ps, outs, "min").reshape(len(probs), N)
        prm[name] = {"auroc": auroc(flat[keep], exact[keep]), "bon": float(best_of_n(pool, scores, N).mean())}
    return {"prm": prm, "majority": float(majority(pool, N).mean()), "first": float(pool.correct[:, 0].mean()),
            "single": float(pool.correct.mean()), "wrong_chain_steps": int((exact[keep] == 0).sum()), "best_of": N,
            "n_train": cfg.n_train}


def rate(r: dict, exact: int, rollouts: int, k: int | None = None) -> float:
    """The share of steps with this exact label whose hard estimate over `rollouts` says "right": the false-positive
    rate for exact = 0, the true-positive rate for exact = 1."""
    cs = [c for kl, c in r["cells"].items()
          if int(kl.split("/")[1]) == exact and (k is None or int(kl.split("/")[0]) == k)]
    return sum(c[f"any{rollouts}"] for c in cs) / max(1, sum(c["n"] for c in cs))


def count(r: dict, exact: int) -> int:
    return sum(c["n"] for kl, c in r["cells"].items() if int(kl.split("/")[1]) == exact)


def room(cfg: Config) -> tuple[float, float]:
    """The primary's statistic, a difference of two AUROCs, lies in [-1, 1]."""
    return (-1.0, 1.0)


def placebo(cfg: Config) -> Config:
    """The treatment PRM trained on the control's labels (Math-Shepherd's at 8 rollouts), on training problems and
    rollouts of its own: an independent replicate of the control PRM."""
    return replace(cfg, treatment="prm-mc")


def premises(rs: list[dict]) -> list[dict]:
    """What the claims rest on: wrong steps to label, the rates' monotone rise and fall in the rollouts (true by
    construction), and best-of-N with each PRM not falling below its first sample."""
    lo, hi = min(ROLLOUTS), max(ROLLOUTS)
    wrong = [min(count(r, 0), r["wrong_chain_steps"]) for r in rs]
    m, ci = findings.seed_interval(wrong)
    N = rs[0]["best_of"]
    return [findings.premise(findings.finding(
                SEC, "The erring thinker's chains have wrong steps to label in every seed (the rates' chains and the "
                "PRMs' scored ones)", "wrong chain steps, the fewer of the two", m, ci, wrong, "> 0 in every seed",
                findings.HOLDS if min(wrong) > 0 else findings.FAILS), "wrong_steps"),
            findings.premise(findings.seed_check(
                SEC, f"More rollouts make Math-Shepherd's hard labels pass more wrong steps: the false-positive rate "
                f"rises from {lo} to {hi} rollouts (at least as many by construction)", f"FP({hi}) - FP({lo})",
                [rate(r, 0, hi) - rate(r, 0, lo) for r in rs], TH["labels.fp_rise"]), "fp_rise"),
            findings.premise(findings.seed_check(
                SEC, f"More rollouts miss fewer right steps: the false-negative rate falls from {lo} to {hi} rollouts "
                "(at most as many by construction)", f"FN({lo}) - FN({hi})",
                [(1 - rate(r, 1, lo)) - (1 - rate(r, 1, hi)) for r in rs], TH["labels.fn_fall"]), "fn_fall"),
            *(no_fall(SEC, f"the PRM trained on {SHOWN[name]}", {1: [r["first"] for r in rs],
                                                                 N: [r["prm"][name]["bon"] for r in rs]},
                      f"prm_{name}") for name in PRMS)]


def claims(rs: list[dict]) -> list[dict]:
    N = rs[0]["best_of"]
    at = lambda name, key: [r["prm"][name][key] for r in rs]                          # noqa: E731
    d = lambda a, b, key: [x - y for x, y in zip(at(a, key), at(b, key))]              # noqa: E731
    return premises(rs) + [
        findings.primary(findings.seed_check(
            SEC, "A PRM trained on the exact step labels (up to the first error, as PRM800K's) ranks chain steps "
            "better than one trained on Math-Shepherd's 8-rollout labels of the same outputs (chain-step AUROC "
            "against the exact labels, steps up to the first error)", "AUROC(exact) - AUROC(MC, 8)",
            d("exact", "mc8", "auroc"), TH["labels.prm_noise"],
            control="the PRM trained on Math-Shepherd's 8-rollout labels (placebo: both on those labels)",
            requires=["wrong_steps"])),
        findings.seed_check(SEC, "At 8 rollouts (Math-Shepherd's N) more than 5 % of wrong steps are labelled right",
                            "FP(8)", [rate(r, 0, 8) for r in rs], TH["labels.fp_level"], room=(0.0, 1.0),
                            requires=["wrong_steps"]),
        findings.seed_check(SEC, "Noisier labels train a worse PRM: 8 rollouts rank steps better than 1",
                            "AUROC(MC, 8) - AUROC(MC, 1)", d("mc8", "mc1", "auroc"), TH["labels.prm_rollouts"],
                            control="the 1-rollout PRM", requires=["wrong_steps"]),
        findings.seed_check(SEC, f"The label noise reaches the answer: best-of-{N} with the exact-label PRM beats "
                            f"best-of-{N} with the 8-rollout one", "BoN(exact) - BoN(MC, 8)", d("exact", "mc8", "bon"),
                            TH["labels.prm_label_bon"], control="best-of-N with the 8-rollout PRM",
                            requires=["prm_exact", "prm_mc8"]),
        findings.seed_check(SEC, "The 8-rollout PRM still beats majority voting over the same samples (the policy "
                            "without a verifier)", f"BoN(MC, 8) - maj@{N}",
                            [r["prm"]["mc8"]["bon"] - r["majority"] for r in rs], TH["labels.prm_bon"],
                            control="majority voting over the same samples", requires=["prm_mc8"])]


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
    prms = md_table(["PRM trained on", "chain-step AUROC (to the first error)", f"best-of-{rs[0]['best_of']}"],
                    [[SHOWN[name], pm([r["prm"][name]["auroc"] for r in rs]), pm([r["prm"][name]["bon"] for r in rs])]
                     for name in PRMS]
                    + [["(none: majority voting)", "–", pm([r["majority"] for r in rs])],
                       ["(none: one sample)", "–", pm([r["single"] for r in rs])],
                       ["(none: the first sample, best-of-1)", "–", pm([r["first"] for r in rs])]])
    fs = findings.gate(claims(rs))
    head = f"FP {pm([rate(r, 0, 8) for r in rs])}, FN {pm([1 - rate(r, 1, 8) for r in rs])} at 8 rollouts"
    md = f"""## Process labels, measured: Math-Shepherd's rollouts against the exact labels

{opening("labels")}

![label error rates](labels/rates.png)

{rates}

The erring thinker's sampled S chains ({rs[0]['steps']} steps before the answer per seed), 16 rollouts per step at
temperature 1; mean ± std over seeds.

That more rollouts pass more wrong steps and miss fewer right ones holds by construction (any of 16 rollouts
reaching the answer includes the first doing so): premises, checked. What the noise costs a PRM is the open
question: each PRM trained on the same two S chains per problem ({rs[0]['n_train']} problems per k), the exact one on
the rule's labels up to the first wrong step (PRM800K's labellers stop there), the Math-Shepherd ones on every step;
read on fresh S samples of the test problems: the chain-step AUROC against the exact labels on the steps up to each
chain's first error (what PRM800K labels; all a weakest-step score reads), and best-of-{rs[0]['best_of']} with the
min over step scores (an output that ends without an answer scores 0):

{prms}

{" ".join(findings.verdict_line(f) for f in fs)}

*Paper:* Math-Shepherd (Wang et al. 2023, arXiv 2312.08935).
{reading("labels")}
"""
    return [(md, head)]


def check(result) -> None:
    if not isinstance(result.get("cells"), dict) or not isinstance(result.get("prm"), dict) \
            or set(result["prm"]) != set(PRMS) or "first" not in result:
        raise ValueError("a labels result needs its cells, each PRM's AUROC and best-of-N, and best-of-1 (first)")


QUESTION = """Math-Shepherd labels a step right when a rollout from it reaches the answer. How often is that label
wrong, how does the number of rollouts move the errors, and does the noise cost a PRM: does one trained on the exact
labels rank steps better than one trained on Math-Shepherd's?"""
EXPLORE = """`reasonlab labels --best-of 64`; `methods.verifier.train_verifier` with `VerifierConfig(kind="prm-mc",
rollouts=2)` trains a PRM on them."""

register(Experiment("labels", Config, run, claims, render, question=QUESTION, explore=EXPLORE,
                    depends=on_erring(VerifierConfig), check=check, streams=1,
                    takes_checkpoint=False, room=room, placebo=placebo, quick=Config(n_test=3, n_train=3, best_of=2),
                    run_cost=20, render_cost=0.5, tier="lesson"))
