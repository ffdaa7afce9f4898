"""Sampling more (voting, pass@N) and verifiers with the compute-optimal frontier, on one sample pool per format.

One seed samples a pool of n_max outputs per problem for each format, decodes greedily per format and with the
chain capped at b steps, and reads every method's curve over N, per k, and Snell et al.'s compute-optimal
frontier off those pools (methods.tts). The report has two sections: voting, and verifiers with the frontier.

A demonstration: it asks no open question. Voting over direct answers stays below a chain at every k above the
smallest (digits: k >= 3): the base recipe trains until the chains are right, and a direct answer beyond a few
digits is at or near chance, with no reasoning path for the vote to marginalise over. That is a premise; the
frontier's saving is a secondary.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .. import tasks
from ..core.config import NS, SAMPLE_ROW, Count, fits
from ..core.model import GPT
from ..core.pool import Pool, sample_pool
from ..core.problems import problems_per_k, test_problems
from ..io.report import TOKEN_COLOR, chance_at, chance_level, log_x, md_table, plt, save
from ..methods import tts
from ..stats import findings
from ..stats.findings import both, finding, missing, seed_check
from ..stats.summary import bootstrap_ci, pareto, pm
from ..tasks import Problem, Task, chain_steps
from . import Experiment, opening, reading, register, task_of
from .thresholds import THRESHOLDS as TH

N_MOST = 50_000
"""The most problems per k: half are drawn from the validation part and half from the test part, all distinct, and
digits' k = 5 (the smallest k drawn at random rather than enumerated) has 25,171 and 25,213 problems there."""


@dataclass
class Config:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    n_problems: Count = 500
    """problems per k in the sampling grid (half from the validation part, half from the test part: this seed's own
    draws)"""
    n_max: Count = 32
    """samples per problem (N = 1, 2, 4, ... up to this)"""
    formats: tuple[Literal["A", "S", "T", "free"], ...] = ("A", "S", "T")
    """the pools sampled: a forced format (A, S, T), or free (the model picks)"""
    budgets: bool = False
    """also run s1's budget-forcing sweep (greedy, the chain capped at or extended to b steps, on up to 500 problems
    per k of its own); its capped points are drawn on the frontier plot"""

    def validate(self) -> None:
        if self.n_max not in NS:
            raise ValueError(f"n_max must be one of {', '.join(map(str, NS))}, got {self.n_max}")
        if not self.formats or len(set(self.formats)) < len(self.formats):
            raise ValueError(f"formats must be distinct ones of {', '.join(tts.FORCE)}, got "
                             f"{' '.join(map(str, self.formats)) or 'none'}")
        if self.n_problems > N_MOST:
            raise ValueError(f"n_problems must be at most {N_MOST:,} (digits' k = 5 has about 25,000 distinct problems in each "
                             f"of the validation and test parts), got {self.n_problems:,}")
        per_problem = len(tasks.get(self.task).ks()) * self.n_max * len(self.formats)
        fits("n_problems", self.n_problems * per_problem, SAMPLE_ROW, per_problem)


def budget_caps(task: Task) -> tuple[tuple[str, range], ...]:
    """The frontier's budget-forced candidates: greedy chains capped at b steps, for each b below a format's full
    chain at the task's largest k (digits: T capped at 0..7, S at 0..3)."""
    return (("T", range(0, task.k_max)), ("S", range(0, len(chain_steps(task.k_max, "short")))))


def problem_set(n: int, seed: int, task: str | Task = "digits") -> list[Problem]:
    """n problems per k for the whole grid: half from the validation part of the problem space, half from the test
    part (core.problems.part_of), so that the frontier selects and scores on disjoint problems; each seed draws its
    own (digits' k = 2 has 25 in each part, all of them)."""
    return (problems_per_k(n // 2, seed=f"sampling-val-{seed}", split="val", task=task)
            + test_problems(n - n // 2, "sampling", seed, task=task))


def run(cfg: Config, seed: int, env) -> dict:
    return grid(env.base(seed, cfg.task), cfg, seed)


def grid(model: GPT, cfg: Config, seed: int) -> dict:
    """The test-time-compute grid on one model: one seed's JSON-able result (with cfg.budgets, also the budget
    sweep under "budgets")."""
    task = tasks.get(cfg.task)
    problems = problem_set(cfg.n_problems, seed, task)
    res = {"n_per_k": cfg.n_problems, "n_max": cfg.n_max, "seed": seed, "formats": list(cfg.formats), "timing": {}}
    if task.spec != "digits":                         # a digits result keeps the keys it always had
        res["task"] = task.spec
    pools = {}
    t0 = time.perf_counter()
    for fmt in cfg.formats:
        t = time.perf_counter()
        pools[fmt] = sample_pool(model, problems, cfg.n_max, force=tts.FORCE[fmt], temperature=1.0, seed=seed)
        res["timing"]["sample_" + fmt] = round(time.perf_counter() - t, 2)
    greedy = {fmt: sample_pool(model, problems, 1, force=tts.FORCE[fmt], temperature=0.0) for fmt in cfg.formats}
    res["timing"]["greedy"] = round(time.perf_counter() - t0 - sum(res["timing"].values()), 2)
    res.update(summarize(pools, greedy, cfg.n_max, seed))
    capped = {f"{f}<={b}": sample_pool(model, problems, 1, force=tts.FORCE[f], temperature=0.0,
                                       logit_hook=tts.budget_hook(task, max_chain=b))
              for f, bs in budget_caps(task) if f in cfg.formats for b in bs}
    res["frontier"] = tts.frontier(tts.candidates(pools, greedy, capped), problems, seed)
    res["timing"]["grid"] = round(time.perf_counter() - t0, 2)
    if cfg.budgets:
        t = time.perf_counter()
        probs = test_problems(min(cfg.n_problems, 500), "sampling", seed, task=task)
        t_end, s_end = task.k_max + 1, len(chain_steps(task.k_max, "short")) + 1   # digits: 9 and 5
        res["budgets"] = (tts.budget_sweep(model, probs, "T", range(0, t_end))
                          + tts.budget_sweep(model, probs, "S", range(0, s_end))
                          + tts.budget_sweep(model, probs, "T", range(t_end, t_end + 4), kind="min")
                          + tts.budget_sweep(model, probs, "S", range(s_end, s_end + 4), kind="min"))
        res["timing"]["budgets"] = round(time.perf_counter() - t, 2)
    return res


def summarize(pools: dict[str, Pool], greedy: dict[str, Pool], n_max: int, seed: int) -> dict:
    """Per format, every method's accuracy at each N with its 95 % bootstrap interval, greedy's, and the tokens
    spent ("curves"); the same accuracies per k ("per_k"), with intervals for maj and pass ("per_k_ci")."""
    ks = sorted(set(next(iter(pools.values())).k.tolist()))
    out = {"curves": {}, "per_k": {}, "per_k_ci": {}}
    for fmt, pool in pools.items():
        c = tts.curves(pool)
        out["curves"][fmt] = {m: {N: tts.summarize_scores(v, seed) for N, v in d.items()} for m, d in c.items()}
        out["curves"][fmt]["greedy"] = tts.summarize_scores(greedy[fmt].correct[:, 0].astype(float), seed)
        out["curves"][fmt]["tokens"] = {N: tts.tokens(pool, N) for N in NS if N <= n_max}
        out["per_k"][fmt] = {k: {m: {N: float(v[pool.k == k].mean()) for N, v in d.items()} for m, d in c.items()}
                             for k in ks}
        out["per_k_ci"][fmt] = {k: {m: {N: bootstrap_ci(v[pool.k == k], n_boot=300, seed=seed) for N, v in c[m].items()}
                                    for m in ("maj", "pass")} for k in ks}
        for k in ks:
            out["per_k"][fmt][k]["greedy"] = float(greedy[fmt].correct[greedy[fmt].k == k, 0].mean())
    return out


def chance(task: Task, method: str, N: int, ks=None) -> float:
    """Guessing blindly, mean over ks (default: the task's range): the best guess's accuracy (`Task.chance`) for one
    answer, 1 - (1 - chance)^N for pass@N, N guesses each right with that chance (digits: 0.1 and 1 - 0.9^N)."""
    c = chance_level(task, ks)
    if method not in ("pass", "verified_pass"):
        return c
    cs = [chance_at(task, k) for k in (task.ks() if ks is None else ks)]
    return 1 - (1 - c) ** N if len(set(cs)) == 1 else float(np.mean([1 - (1 - x) ** N for x in cs]))


def vote_below_chain(sampling: list[dict]) -> dict:
    """The premise: voting does not buy what a chain buys. At every k above the task's smallest (digits: k >= 3),
    maj@N of direct answers stays below the greedy chain (the better of S and T): the base recipe trains until the
    chains are right, and a direct answer beyond a few digits has no reasoning path for the vote to marginalise
    over."""
    n = sampling[0]["n_max"]
    k0 = task_of(sampling[0]).k_min + 1
    chains = [f for f in ("S", "T") if f in sampling[0]["per_k"]]
    claim = (f"Voting does not buy what a chain buys: maj@{n} of direct answers stays below the greedy chain at every "
             f"k >= {k0}")
    if "A" not in sampling[0]["per_k"] or not chains:
        return findings.premise(missing("sampling", claim, "needs the A pool and an S or T pool"), "vote_below_chain")

    def gap(r):
        return min(max(r["per_k"][f][k]["greedy"] for f in chains) - r["per_k"]["A"][k]["maj"][n]
                   for k in r["per_k"]["A"] if k >= k0)
    return findings.premise(seed_check(
        "sampling", claim, f"min over k >= {k0} of acc(greedy chain) - acc(A maj@{n})", [gap(r) for r in sampling],
        TH["sampling.chain_over_vote"]), "vote_below_chain")


def frontier_gain(sampling: list[dict]) -> dict:
    """Snell et al.'s compute-optimal choice per k against the best single strategy, at the highest target every
    seed reaches (selected on validation problems, scored on test): the log of the token ratio, with the test
    accuracy of the per-k choice within the margin of the single strategy's (the cheapest policy, a direct answer
    everywhere, saves tokens too and fails the accuracy)."""
    targets = [t["target"] for t in sampling[0]["frontier"]["targets"]]
    ok = [i for i in range(len(targets)) if all(r["frontier"]["targets"][i].get("reachable") for r in sampling)]
    claim = "Choosing the strategy per k saves tokens over the best single strategy at matched test accuracy"
    if not ok:
        return missing("sampling", claim, "no target reached on every seed")
    i = ok[-1]
    ts = [r["frontier"]["targets"][i] for r in sampling]
    saving = [float(np.log(t["fixed"]["tokens"] / t["adaptive"]["tokens"])) for t in ts]
    gap = [t["adaptive"]["acc"] - t["fixed"]["acc"] for t in ts]
    sv = seed_check("sampling", "", "", saving, TH["sampling.frontier_saving"])
    g = seed_check("sampling", "", "", gap, TH["sampling.acc_gap"])
    return finding("sampling", f"{claim}, at accuracy {targets[i]}", "log(tokens(best single) / tokens(per-k choice)) "
                "on test", sv["value"], sv["ci95"], sv["per_seed"], "> 0 (and test accuracy gap > -0.02)",
                both(sv["verdict"], g["verdict"]), p=max(sv["p"], g["p"]), source=TH["sampling.frontier_saving"].source,
                accuracy_gap={"value": g["value"], "ci95": g["ci95"], "per_seed": g["per_seed"]},
                single=[t["fixed"]["strategy"] for t in ts], per_k=ts[0]["adaptive"]["per_k"], kind=findings.SECONDARY)


def claims(rs: list[dict]) -> list[dict]:
    """A demonstration: its premise, and the frontier's saving as a secondary (it rests on no premise)."""
    return [vote_below_chain(rs), {**frontier_gain(rs), "requires": []}]


# ---------------------------------------------------------------------------------------------------------------
# Plots: one seed's result.

METHOD_STYLE = {"maj": ("maj@N (self-consistency)", "-"), "weighted": ("probability-weighted vote", "--"),
                "verifier": ("best-of-N, process verifier", "-."), "pass": ("pass@N (oracle)", ":"),
                "verified_pass": ("verified pass@N", (0, (1, 3)))}


def _ci_line(ax, xs, cells, label, style, color=None):
    y = [c["acc"] for c in cells]
    line, = ax.plot(xs, y, ls=style, marker="o", ms=3, label=label, color=color)
    ax.fill_between(xs, [c["lo"] for c in cells], [c["hi"] for c in cells], color=line.get_color(), alpha=0.15)


def plot_vs_n(res: dict, path: str) -> str:
    """Accuracy against N per format, every method, with 95 % bootstrap bands and both chance curves."""
    task = task_of(res)
    fmts = res["formats"]
    fig, axes = plt.subplots(1, len(fmts), figsize=(5 * len(fmts), 3.8), sharey=True)
    for ax, f in zip(np.atleast_1d(axes), fmts):
        c = res["curves"][f]
        for m, (label, style) in METHOD_STYLE.items():
            Ns = sorted(int(n) for n in c[m])
            _ci_line(ax, Ns, [c[m][n] for n in Ns], label, style)
        ax.axhline(c["greedy"]["acc"], color="k", lw=1, label="greedy")
        c1 = chance(task, "maj", 1)
        ax.axhline(c1, color="grey", ls=":", lw=1, label=f"chance, one answer ({c1:.2g})")
        ax.plot(Ns, [chance(task, "pass", n) for n in Ns], color="grey", ls="--", lw=1,
                label=f"chance, pass@N (1 - {1 - c1:.2g}^N)")
        log_x(ax, 2)
        ax.set_xlabel("samples per problem N")
        ax.set_title(f"forced {f}" if f != "free" else "free format")
    np.atleast_1d(axes)[0].set_ylabel(f"accuracy (k = {task.k_min}..{task.k_max})")
    np.atleast_1d(axes)[-1].legend(fontsize=7, loc="lower right")
    return save(fig, path)


def plot_frontier(res: dict, path: str) -> str:
    """Accuracy against generated tokens per problem: every (format, method, N), the budget-forcing points, the
    Pareto front, and the per-k compute-optimal choices."""
    task = task_of(res)
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    pts = res["frontier"]["points"]
    colors = TOKEN_COLOR
    for f in res["formats"]:
        p = [q for q in pts if q["format"] == f]
        err = [[q["acc"] - q["ci"][0] for q in p], [q["ci"][1] - q["acc"] for q in p]] if p and "ci" in p[0] else None
        ax.errorbar([q["tokens"] for q in p], [q["acc"] for q in p], yerr=err, fmt="o", ms=3.5, elinewidth=0.8,
                    color=colors[f], label=f"{f}: vote / verifier, N = 1..64 (95 % CI)")
    for b in res.get("budgets", []):
        if b["kind"] == "max":
            ax.scatter(b["tokens"], b["acc"], marker="x", s=22, color=colors[b["format"]])
    front = [pts[i] for i in pareto([(q["tokens"], q["acc"]) for q in pts])]
    ax.plot([q["tokens"] for q in front], [q["acc"] for q in front], color="k", lw=1.2,
            label="Pareto front (fixed strategies)")
    ad = [t for t in res["frontier"]["targets"] if t.get("reachable")]
    if ad:
        ax.scatter([t["adaptive"]["tokens"] for t in ad], [t["adaptive"]["acc"] for t in ad], marker="*", s=120,
                   color="crimson", zorder=5, label="compute-optimal per k (chosen on validation)")
    c1 = chance(task, "maj", 1)
    ax.axhline(c1, color="grey", ls=":", lw=1, label=f"chance ({c1:.2g})")
    log_x(ax)
    ax.set_xlabel("generated tokens per problem (log)")
    ax.set_ylabel(f"accuracy, test half (k = {task.k_min}..{task.k_max})")
    ax.legend(fontsize=7, loc="lower right")
    if res.get("budgets"):
        ax.set_title("x: budget forcing (chain capped at b steps, greedy)", fontsize=9)
    return save(fig, path)


def plot_per_k(res: dict, path: str) -> str:
    """One panel per k: maj@N per format and pass@N of direct answers, with chance."""
    task = task_of(res)
    ks = sorted(int(k) for k in res["per_k"][res["formats"][0]])
    fig, axes = plt.subplots(1, len(ks), figsize=(2.6 * len(ks), 3.0), sharey=True)
    colors = TOKEN_COLOR
    for ax, k in zip(axes, ks):
        for f in res["formats"]:
            d = res["per_k"][f][k]
            ci = res.get("per_k_ci", {}).get(f, {})
            ci = ci.get(k)
            Ns = sorted(int(n) for n in d["maj"])
            ax.plot(Ns, [d["maj"][n] for n in Ns], marker="o", ms=2, color=colors[f], label=f"{f} maj@N")
            if ci:
                ax.fill_between(Ns, [ci["maj"][n][0] for n in Ns], [ci["maj"][n][1] for n in Ns], color=colors[f],
                                alpha=0.2)
            if f == "A":
                ax.plot(Ns, [d["pass"][n] for n in Ns], ls=":", color=colors[f], label="A pass@N")
        ax.plot(Ns, [chance(task, "pass", n, [k]) for n in Ns], color="grey", ls="--", lw=0.8)
        ax.axhline(chance(task, "maj", 1, [k]), color="grey", ls=":", lw=0.8)
        log_x(ax, 2)
        ax.set_title(f"k = {k}")
        ax.set_xlabel("N")
    axes[0].set_ylabel("accuracy")
    axes[-1].legend(fontsize=6, loc="lower right")
    return save(fig, path)


# ---------------------------------------------------------------------------------------------------------------
# The report's two sections.

def render_sampling(rs: list[dict], out: str) -> tuple[str, str]:
    plot_vs_n(rs[0], os.path.join(out, "sampling", "acc_vs_n.png"))
    plot_per_k(rs[0], os.path.join(out, "sampling", "per_k.png"))
    n = rs[0]["n_max"]
    fmts = rs[0]["formats"]
    task = task_of(rs[0])

    def acc(f, m, N):
        return pm([r["curves"][f][m][N]["acc"] for r in rs])
    table = md_table(["format", "greedy", "maj@1", f"maj@{min(8, n)}", f"maj@{n}", f"pass@{n} (oracle)", f"tokens@{n}"],
                     [[f, pm([r["curves"][f]["greedy"]["acc"] for r in rs]), acc(f, "maj", 1), acc(f, "maj", min(8, n)),
                       acc(f, "maj", n), acc(f, "pass", n), f"{np.mean([r['curves'][f]['tokens'][n] for r in rs]):.0f}"]
                      for f in fmts]
                     + [["chance", *(f"{chance(task, m, n):.3f}" for m in ("maj", "maj", "maj", "maj", "pass")), ""]])
    if "A" in fmts:
        head = f"A maj@{n} {acc('A', 'maj', n)} vs greedy A {pm([r['curves']['A']['greedy']['acc'] for r in rs])}"
        direct = f"pass@{n} of direct answers is {acc('A', 'pass', n)} where guessing gives {chance(task, 'pass', n):.3f}."
    else:
        head, direct = f"{fmts[0]} maj@{n} {acc(fmts[0], 'maj', n)}", ""
    greedy = "; ".join(f"greedy {f} {pm([r['curves'][f]['greedy']['acc'] for r in rs])}" for f in fmts)
    md = f"""## Sampling more: voting

{opening("sampling")}

![accuracy against N](sampling/acc_vs_n.png)

![per k](sampling/per_k.png)

{table}

{rs[0]['n_per_k']} problems per k, N up to {n} samples at temperature 1, mean ± std over seeds (the picture: first
seed, 95 % bootstrap bands over problems; grey: chance for one answer and for pass@N, 1 − (1 − chance)^N).
A demonstration: {findings.verdict_line(vote_below_chain(rs))} {direct} For comparison: {greedy}. Whether
voting helps chains that err is measured on the erring thinker (the `search` and `voting` experiments).

{reading("sampling")}
"""
    return md, head


def render_verifiers(rs: list[dict], out: str) -> tuple[str, str]:
    plot_frontier(rs[0], os.path.join(out, "sampling", "frontier.png"))
    n = rs[0]["n_max"]
    table = md_table(["format", f"maj@{n}", f"best-of-{n}, process verifier", f"verified pass@{n}"],
                     [[f, *(pm([r["curves"][f][m][n]["acc"] for r in rs])
                            for m in ("maj", "verifier", "verified_pass"))] for f in rs[0]["formats"]])
    rows, head = [], ""
    for i, t in enumerate(rs[0]["frontier"]["targets"]):
        ts = [r["frontier"]["targets"][i] for r in rs]
        if all(x.get("reachable") for x in ts):
            ratio = pm([x["ratio"] for x in ts], "{:.2f}")
            rows.append([t["target"], pm([x["adaptive"]["tokens"] for x in ts], "{:.2f}"),
                         pm([x["fixed"]["tokens"] for x in ts], "{:.2f}"), f"{ratio}×"])
            head = f"compute-optimal per k uses {ratio}× fewer tokens at {t['target']}"
    targets = md_table(["target accuracy", "compute-optimal per k: tokens", "best fixed strategy: tokens",
                        "fixed / optimal"], rows)
    md = f"""## Verifiers and the compute-optimal frontier

> **Question.** Every chain step can be checked (a process verifier). Does picking a verified sample beat the
> vote, and what is the cheapest strategy for each difficulty?

![accuracy against tokens](sampling/frontier.png)

{table}

{targets}

The rule's process verifier accepts only chains whose every step checks, so it has nothing to say about a direct
answer (its vote falls back to the plain majority). The frontier's candidates are every strategy run here:
greedy per format, budget-capped greedy chains, majority, probability-weighted vote and verifier best-of-N at every
N. Per k and on the validation problems it picks the cheapest candidate reaching each target; on the disjoint
test problems (`core.problems.part_of`) it compares those tokens with the cheapest single candidate that reaches the
target at every k. Mean ± std over seeds. {findings.verdict_line(frontier_gain(rs))}

*Papers:* Let's verify step by step (Lightman et al. 2023, arXiv 2305.20050); compute-optimal test-time scaling
(Snell et al. 2024, arXiv 2408.03314).
*Explore:* `tts.frontier(tts.candidates(pools), problems, targets=...)` with your own targets, or
`reasonlab sampling --formats A S T free`.
"""
    return md, head


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    return [render_sampling(rs, out), render_verifiers(rs, out)]


QUESTION = """Instead of thinking, sample N direct answers and take the majority. Does voting buy what a chain buys?"""
PAPERS = """self-consistency (Wang et al. 2022, arXiv 2203.11171); pass@k (Chen et al. 2021, arXiv 2107.03374);
repeated sampling (Brown et al. 2024, arXiv 2407.21787)."""
EXPLORE = """`reasonlab sampling --formats A free --n-max 64`, or a probability-weighted vote (`tts.weighted_vote`)."""

register(Experiment("sampling", Config, run, claims, render, question=QUESTION, papers=PAPERS, explore=EXPLORE,
                    keys=("curves", "formats", "frontier", "n_max"),
                    quick=Config(n_problems=40, n_max=8), run_cost=14, render_cost=1.1))
