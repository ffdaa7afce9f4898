"""Adaptive thinking: make thinking cost something in the reward; does the model learn when to think?

Each method of `methods.adaptive` trains a copy of the base model with GRPO (lr 1e-4, 200 steps, 16 x 8 samples,
its forced-direct rollouts) and is evaluated greedily on the seed's own test draw; the fixed formats and two
test-time compute points are measured on the same problems. The result is the accuracy / mean-tokens plane, with the
Pareto front, and the control every method must beat: the best fixed format per k, chosen on a selection set drawn
from the val part (never on the test problems it is scored on), the lookup table a skeptic would write instead of
training. The placebo puts that control in the method's place (`fixed_per_k`): it cannot pass.
"""
from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from .. import tasks
from ..core.config import Count, NonNegative, NTest, Positive, Steps, check_numbers
from ..core.evaluate import evaluate
from ..core.model import GPT
from ..core.pool import sample_pool
from ..core.problems import problems_per_k, test_problems
from ..io.report import chance_level, log_x, md_table, plt, save
from ..methods import tts
from ..methods.adaptive import METHODS, Method, method_parts, reference_accuracy
from ..stats import findings
from ..stats.findings import both, finding, seed_check
from ..stats.summary import mean_std, pareto
from ..tasks import FMT_NAMES, Problem, Task
from ..train.rl import RLConfig, train
from . import Experiment, opening, reading, register, replicate_seed, task_of
from .thresholds import THRESHOLDS as TH

CONTROL = "fixed_per_k"
"""the control as a method: the best fixed format per k chosen on the selection set, no training (the placebo)"""
Arm = Literal[Method, "fixed_per_k"]
TOL = 0.005
"""formats whose selection accuracy at a k is within this of the best count as tied there: the cheapest is chosen"""


@dataclass
class Config:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    steps: Steps = 200
    """RL steps per adaptive-thinking run"""
    methods: tuple[Arm, ...] = ("thinkless_fmt",)
    """adaptive-thinking rewards compared (methods.adaptive.METHODS; the first is the primary's treatment), or
    fixed_per_k: the control itself"""
    n_test: NTest = 300
    """greedy test problems per k (the seed's own test draw)"""
    n_val: Count = 300
    """selection problems per k from the val part, on which the control picks its format per k"""
    learning_rate: Positive = 1e-4
    """Adam learning rate of every run"""
    beta: NonNegative = 0.04
    """KL weight to the base model (0: none)"""

    def validate(self) -> None:
        check_numbers(self, "adaptive")
        if not self.methods:
            raise ValueError(f"adaptive: methods must be among {', '.join(METHODS)} or {CONTROL}, at least one")


def point(model: GPT, problems, force=None) -> dict:
    """Greedy accuracy, mean generated tokens, and format share per k."""
    r = evaluate(model, problems, force=force)
    return {"acc": r["acc"], "tokens": r["length"], "acc_by_k": {k: v["acc"] for k, v in r["per_k"].items()},
            "share_by_k": {k: v["share"] for k, v in r["per_k"].items()},
            "tokens_by_k": {k: v["length"] for k, v in r["per_k"].items()},
            "n_by_k": {k: sum(p.k == k for p in problems) for k in r["per_k"]}}


def run_method(base: GPT, name: str, seed: int, probs: list[Problem], steps: int = 200, lr: float = 1e-4,
               ref_acc: dict | None = None, beta: float = 0.04, progress: bool = False, **overrides) -> dict:
    """Train a copy of `base` with one method's reward on the task of `probs` and evaluate it greedily on `probs`
    (the seed's test draw); overrides are RLConfig fields."""
    reward_fn, group_fn, fields = method_parts(name, ref_acc)
    cfg = RLConfig.preset("grpo", **{**dict(steps=steps, learning_rate=lr, seed=seed, log_every=0, beta=beta,
                                            task=tasks.of(probs).spec), **fields, **overrides})
    policy = copy.deepcopy(base)
    t = time.perf_counter()
    hist = train(policy, copy.deepcopy(base), cfg, reward_fn=reward_fn, group_fn=group_fn, log=None, progress=progress)
    out = point(policy, probs)
    out["direct_acc_by_k"] = point(policy, probs, force=["A"])["acc_by_k"]   # how far direct answering was pushed
    return {"method": name, "seed": seed, "seconds": round(time.perf_counter() - t, 1), **out,
            "share_direct_over_steps": [h["share"]["direct"] for h in hist if "share" in h]}


def fixed_method(fixed: dict, pick: dict, seed: int) -> dict:
    """The control as a method (the placebo's arm): per k the picked format's forced greedy run on the test draw,
    read off `fixed` (the same outputs the control is scored on), untrained."""
    at = lambda key: {k: fixed[f][key][k] for k, f in pick.items()}   # noqa: E731
    scored = score_per_k(fixed, pick)
    return {"method": CONTROL, "seed": seed, "seconds": 0.0, "acc": scored["acc"], "tokens": scored["tokens"],
            "acc_by_k": at("acc_by_k"), "tokens_by_k": at("tokens_by_k"), "share_by_k": at("share_by_k"),
            "n_by_k": at("n_by_k"), "direct_acc_by_k": dict(fixed["A"]["acc_by_k"]), "share_direct_over_steps": []}


def fixed_points(base: GPT, probs: list[Problem]) -> dict:
    """Always-A / always-S / always-T (forced, greedy) on `probs`: accuracy, tokens, and both per k."""
    return {f: point(base, probs, force=[f]) for f in ("A", "S", "T")}


def mean_points(per_base: list[dict]) -> dict:
    """{format: {acc, tokens, acc_by_k}}, one such dict per base model -> their mean."""
    return {f: {"acc": float(np.mean([p[f]["acc"] for p in per_base])),
                "tokens": float(np.mean([p[f]["tokens"] for p in per_base])),
                **{key: {k: float(np.mean([p[f][key][k] for p in per_base])) for k in per_base[0][f][key]}
                   for key in ("acc_by_k", "tokens_by_k", "n_by_k") if key in per_base[0][f]}}
            for f in per_base[0]}


def pick_per_k(selection: dict, tol: float = TOL) -> dict:
    """The control's choice, per k: the fixed format with the best accuracy on the selection set (within tol of it,
    the one with the fewest tokens there)."""
    pick = {}
    for k in selection["A"]["acc_by_k"]:
        best = max(selection[f]["acc_by_k"][k] for f in selection)
        pick[k] = min((f for f in selection if selection[f]["acc_by_k"][k] >= best - tol),
                      key=lambda f: selection[f]["tokens_by_k"][k])
    return pick


def score_per_k(fixed: dict, pick: dict) -> dict:
    """The per-k policy `pick` scored on the forced runs `fixed` (the test draw): {acc, tokens, per_k}, weighted by
    the problems per k."""
    n = {k: fixed["A"]["n_by_k"][k] for k in pick}
    tot = sum(n.values())
    return {"acc": sum(n[k] * fixed[pick[k]]["acc_by_k"][k] for k in pick) / tot,
            "tokens": sum(n[k] * fixed[pick[k]]["tokens_by_k"][k] for k in pick) / tot, "per_k": dict(pick)}


def tts_points(base: GPT, probs: list[Problem]) -> dict:
    """Two test-time-compute points for the plane: maj@8 of direct answers and maj@4 of short chains, on the
    methods' and fixed formats' problems (the seed's test draw), so the whole table compares on one set."""
    out = {}
    for f, N in (("A", 8), ("S", 4)):
        pool = sample_pool(base, probs, N, force=[f], seed=1)
        out[f"{f} maj@{N}"] = {"acc": float(tts.majority(pool, N).mean()), "tokens": tts.tokens(pool, N)}
    return out


def selection_set(n: int, seed: int, task: str | Task = "digits") -> list[Problem]:
    """The seed's selection problems: n per k from the val part, disjoint from every test draw."""
    return problems_per_k(n, seed=f"adaptive-select-{seed}", split="val", task=task)


def run(cfg: Config, seed: int, env) -> dict:
    spec = tasks.get(cfg.task).spec
    model = env.base(seed, cfg.task)
    probs = test_problems(cfg.n_test, "adaptive", seed, task=cfg.task)
    selection = fixed_points(model, selection_set(cfg.n_val, seed, cfg.task))
    fixed = fixed_points(model, probs)
    pick = pick_per_k(selection)
    ref_acc = reference_accuracy(model, task=cfg.task)
    if CONTROL in cfg.methods:     # the control as a method (the placebo): its pick made again, on a draw of its own
        own = pick_per_k(fixed_points(model, selection_set(cfg.n_val, replicate_seed(seed, "select"), cfg.task)))
    runs = [fixed_method(fixed, own, seed) if m == CONTROL else
            run_method(model, m, seed, probs, steps=cfg.steps, lr=cfg.learning_rate, ref_acc=ref_acc, beta=cfg.beta, progress=True)
            for m in cfg.methods]
    out = {"runs": runs, "fixed": fixed, "selection": selection, "control": score_per_k(fixed, pick),
           "tts": tts_points(model, probs)}
    return out if spec == "digits" else {**out, "task": spec}     # a digits result keeps the keys it always had


def summarize(runs: list[dict], fixed: dict) -> dict:
    """Mean +- std over seeds per method, and which methods sit on the front against the fixed formats."""
    out = {}
    for m in dict.fromkeys(r["method"] for r in runs):
        rs = [r for r in runs if r["method"] == m]
        ks = list(rs[0]["share_by_k"])
        out[m] = {"acc": mean_std([r["acc"] for r in rs]), "tokens": mean_std([r["tokens"] for r in rs]),
                  "share_by_k": {k: {f: float(np.mean([r["share_by_k"][k][f] for r in rs])) for f in FMT_NAMES} for k in ks},
                  "acc_by_k": {k: float(np.mean([r["acc_by_k"][k] for r in rs])) for k in ks},
                  "direct_acc_by_k": {k: float(np.mean([r["direct_acc_by_k"][k] for r in rs])) for k in ks}}
    names = list(out) + [f"always {f}" for f in fixed]
    pts = [(out[m]["tokens"][0], out[m]["acc"][0]) for m in out] + [(fixed[f]["tokens"], fixed[f]["acc"]) for f in fixed]
    front = set(pareto(pts))
    for i, n in enumerate(names):
        if n in out:
            out[n]["on_front"] = i in front
            s = fixed.get("S")
            out[n]["beats_always_S"] = bool(s and out[n]["acc"][0] >= s["acc"] - 1e-9 and out[n]["tokens"][0] < s["tokens"])
    return out


def adaptive_vs_best_fixed(adaptive: list[dict]) -> list[dict]:
    """Each method against the control: the best fixed format per k, chosen on the seed's selection set (val) and
    scored on its test draw, the same problems as the method: no worse than the margin in accuracy, and fewer tokens
    (both must hold). The first method's is the primary."""
    out = []
    for i, run in enumerate(adaptive[0]["runs"]):
        m = run["method"]
        ctl = [r["control"] for r in adaptive]
        acc = [r["runs"][i]["acc"] - c["acc"] for r, c in zip(adaptive, ctl)]
        tok = [c["tokens"] - r["runs"][i]["tokens"] for r, c in zip(adaptive, ctl)]
        a = seed_check("adaptive", "", "", acc, TH["adaptive.acc_margin"])
        t = seed_check("adaptive", "", "", tok, TH["adaptive.token_gain"])
        s_acc = [r["runs"][i]["acc"] - r["fixed"]["S"]["acc"] for r in adaptive]
        s_tok = [r["fixed"]["S"]["tokens"] - r["runs"][i]["tokens"] for r in adaptive]
        f = finding("adaptive", f"{m} is as accurate as the best fixed format per k (within 0.01) with fewer "
                    "tokens (the control: per k, the forced format best on a val selection set, the cheapest of those "
                    "within 0.005; both scored on the seed's test draw)", f"acc({m}) - acc(best fixed per k)",
                    a["value"], a["ci95"], a["per_seed"], "> -0.01 (and tokens saved > 0)", both(a["verdict"], t["verdict"]),
                    p=max(a["p"], t["p"]), source=TH["adaptive.acc_margin"].source,
                    control="best fixed format per k, chosen on val",
                    control_per_k=[{str(k): v for k, v in c["per_k"].items()} for c in ctl],
                    tokens_saved={"value": t["value"], "ci95": t["ci95"], "per_seed": t["per_seed"]},
                    vs_always_S={"acc": [round(x, 4) for x in s_acc], "tokens_saved": [round(x, 4) for x in s_tok]})
        out.append(findings.primary(f) if i == 0 else f)
    return out


def claims(rs: list[dict]) -> list[dict]:
    return adaptive_vs_best_fixed(rs)


def room(cfg: Config) -> tuple[float, float]:
    """The primary's range by the design: a difference of two accuracies lies in [-1, 1]."""
    return -1.0, 1.0


def placebo(cfg: Config) -> Config:
    """The control in the method's place: the first method replaced by fixed_per_k, the control's procedure again
    (untrained; its formats picked on a selection draw of its own, `replicate_seed`), scored on the same outputs."""
    return replace(cfg, methods=(CONTROL, *cfg.methods[1:]))


def plot_heatmap(summary: dict, path: str) -> str:
    """Format share by k for each method: one row per method, colour = share of direct answers; the cell text
    gives A/S/T shares."""
    methods = list(summary["methods"])
    ks = list(next(iter(summary["methods"].values()))["share_by_k"])
    a = np.array([[summary["methods"][m]["share_by_k"][k]["direct"] for k in ks] for m in methods])
    fig, ax = plt.subplots(figsize=(1.1 * len(ks) + 2, 0.45 * len(methods) + 1.2))
    im = ax.imshow(a, cmap="Blues", vmin=0, vmax=1, aspect="auto")
    for i, m in enumerate(methods):
        for j, k in enumerate(ks):
            s = summary["methods"][m]["share_by_k"][k]
            ax.text(j, i, f"{s['direct']:.2f}/{s['short']:.2f}/{s['full']:.2f}", ha="center", va="center", fontsize=6,
                    color="white" if a[i, j] > 0.6 else "black")
    ax.set_xticks(range(len(ks)), [f"k={k}" for k in ks])
    ax.set_yticks(range(len(methods)), methods)
    fig.colorbar(im, ax=ax, label="share answering directly (A)")
    ax.set_title("greedy format choice by k (cells: A/S/T share), mean over seeds", fontsize=9)
    return save(fig, path)


def plot_frontier(summary: dict, path: str) -> str:
    """Accuracy against mean generated tokens: one point per method (mean +- std over seeds), the fixed formats,
    test-time-compute points, and the Pareto front; the right panel zooms in on the learned policies, around always-S
    (summary["task"]: the chance line's task, default digits)."""
    task = summary.get("task") or tasks.get("digits")
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
    pts = [(v["tokens"][0], v["acc"][0]) for v in summary["methods"].values()]
    pts += [(v["tokens"], v["acc"]) for v in summary["fixed"].values()] + [(v["tokens"], v["acc"]) for v in summary.get("tts", {}).values()]
    line = [pts[i] for i in pareto(pts)]
    for ax in axes:
        for m, v in summary["methods"].items():
            ax.errorbar(v["tokens"][0], v["acc"][0], xerr=v["tokens"][1], yerr=v["acc"][1], fmt="o", ms=5, capsize=2, label=m)
        for f, v in summary["fixed"].items():
            ax.scatter(v["tokens"], v["acc"], marker="s", s=50, color="k", zorder=4)
            ax.annotate(f"always {f}", (v["tokens"], v["acc"]), textcoords="offset points", xytext=(5, -10), fontsize=8)
        if "control" in summary:
            c = summary["control"]
            ax.scatter(c["tokens"][0], c["acc"][0], marker="D", s=40, color="C3", zorder=5)
            ax.annotate("best fixed per k (val)", (c["tokens"][0], c["acc"][0]), textcoords="offset points",
                        xytext=(5, 4), fontsize=7, color="C3")
        for name, v in summary.get("tts", {}).items():
            ax.scatter(v["tokens"], v["acc"], marker="^", s=30, color="grey", zorder=3)
            ax.annotate(name, (v["tokens"], v["acc"]), textcoords="offset points", xytext=(4, 3), fontsize=7, color="grey")
        ax.plot([t for t, _ in line], [a for _, a in line], color="k", lw=1, ls="--", label="Pareto front")
        ax.set_xlabel("mean generated tokens per problem")
    chance = chance_level(task)
    axes[0].axhline(chance, color="grey", ls=":", lw=1, label=f"chance ({chance:.2g})")
    log_x(axes[0])
    axes[0].set_ylabel(f"greedy accuracy (k = {task.k_min}..{task.k_max})")
    axes[0].set_title("the whole plane (log tokens)", fontsize=9)
    s = summary["fixed"]["S"]                         # digits: always-S at about 6.7 tokens, so 6.0 to 7.0
    axes[1].set_xlim(s["tokens"] - 0.7, s["tokens"] + 0.3)
    axes[1].set_ylim(min(0.97, s["acc"] - 0.03), 1.004)
    axes[1].set_title("zoom: learned policies against always-S", fontsize=9)
    axes[1].legend(fontsize=7, loc="lower right")
    return save(fig, path)


def adaptive_table(summary: dict) -> str:
    """The methods, the fixed formats and the test-time-compute points on one set, then each method's forced-A
    accuracy per k."""
    ks = list(next(iter(summary["methods"].values()))["share_by_k"])
    rows = [[m, f"{v['acc'][0]:.3f} ± {v['acc'][1]:.3f}", f"{v['tokens'][0]:.2f} ± {v['tokens'][1]:.2f}",
             "yes" if v["on_front"] else "no", "yes" if v["beats_always_S"] else "no",
             " ".join(f"{v['share_by_k'][k]['direct']:.2f}" for k in ks)] for m, v in summary["methods"].items()]
    if "control" in summary:
        c = summary["control"]
        rows.append(["best fixed format per k (chosen on val; the control)", f"{c['acc'][0]:.3f} ± {c['acc'][1]:.3f}",
                     f"{c['tokens'][0]:.2f} ± {c['tokens'][1]:.2f}", "", "", c["picks"]])
    rows += [[f"always {f} (forced, greedy)", f"{v['acc']:.3f}", f"{v['tokens']:.2f}", "", "", ""]
             for f, v in summary["fixed"].items()]
    rows += [[f"{n} (sampling, seed {summary['seeds'][0]})", f"{v['acc']:.3f}", f"{v['tokens']:.2f}", "", "", ""]
             for n, v in summary["tts"].items()]
    table = md_table(["method", "accuracy", "mean tokens", "on the front", "≥ always-S accuracy at fewer tokens",
                      "A-share by k (" + ", ".join(map(str, ks)) + ")"], rows)
    direct = [f"- {m}: " + " ".join(f"{v['direct_acc_by_k'][k]:.2f}" for k in ks) for m, v in summary["methods"].items()]
    return "\n".join([table, "\nForced-A (direct) accuracy per k after training, mean over seeds (base model: "
                      + " ".join(f"{summary['fixed']['A']['acc_by_k'][k]:.2f}" for k in ks) + "):\n", *direct])


def saved(f: dict) -> str:
    """The tokens part of a claim against the control, for the text."""
    t = f["tokens_saved"]
    num = lambda v: "—" if v is None else f"{v:.3f}"   # noqa: E731  (one seed: no interval)
    return (f" Tokens saved against the control: {num(t['value'])}, 95 % CI [{num(t['ci95'][0])}, "
            f"{num(t['ci95'][1])}] (per seed {', '.join(num(v) for v in t['per_seed'])}).")


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    runs = [x for r in rs for x in r["runs"]]
    fixed = mean_points([r["fixed"] for r in rs])
    ctl = [r["control"] for r in rs]
    picks = sorted({"".join(c["per_k"][k] for k in sorted(c["per_k"], key=int)) for c in ctl})
    summary = {"methods": summarize(runs, fixed), "fixed": fixed, "tts": rs[0]["tts"],
               "seeds": sorted({x["seed"] for x in runs}), "task": task_of(rs[0]),
               "control": {"acc": mean_std([c["acc"] for c in ctl]), "tokens": mean_std([c["tokens"] for c in ctl]),
                           "picks": "formats by k: " + " or ".join(picks)}}
    plot_heatmap(summary, os.path.join(out, "adaptive", "heatmap.png"))
    plot_frontier(summary, os.path.join(out, "adaptive", "frontier.png"))
    best = max(summary["methods"], key=lambda m: (summary["methods"][m]["acc"][0], -summary["methods"][m]["tokens"][0]))
    b = summary["methods"][best]
    head = (f"{best}: accuracy {b['acc'][0]:.3f} ± {b['acc'][1]:.3f} at {b['tokens'][0]:.2f} tokens "
            f"(always S {fixed['S']['acc']:.3f} at {fixed['S']['tokens']:.2f})")
    md = f"""## Adaptive thinking: when does thinking pay?

{opening("adaptive")}

![format by k](adaptive/heatmap.png)

![accuracy against tokens](adaptive/frontier.png)

{adaptive_table(summary)}

GRPO with Thinkless's per-format reward; half of each group is forced to answer directly so that A keeps being
tried, and those rollouts train only that choice (`thinkless_fmt`); mean ± std over seeds; every point of the
table and the plane is on each seed's own test draw. The control is the lookup table a skeptic would write instead:
per k, the forced format most accurate on a selection set from the val part (the cheapest within 0.005 of it),
scored on the same test draw. {" ".join(findings.verdict_line(f) + saved(f) for f in adaptive_vs_best_fixed(rs))}

{reading("adaptive")}
"""
    return [(md, head)]


QUESTION = """Make thinking cost something in the reward. Does the model learn to answer directly where that is
reliable and think where it must, and does that beat every fixed format?"""
PAPERS = """Thinkless (Fang et al. 2025, arXiv 2505.13379); AdaptThink (Zhang et al. 2025, arXiv 2505.13417); length
penalties (Arora & Zanette 2025, arXiv 2502.04463); Kimi k1.5 (arXiv 2501.12599)."""
EXPLORE = """`reasonlab adaptive --methods grpo cost0.3 cost0.6 kimi thinkless thinkless_fmt arm adaptthink`."""

register(Experiment("adaptive", Config, run, claims, render, question=QUESTION, papers=PAPERS, explore=EXPLORE,
                    keys=("runs", "fixed", "selection", "control", "tts"),
                    quick=Config(steps=4, n_test=30, n_val=30), run_cost=13, render_cost=0.4, room=room,
                    placebo=placebo))
