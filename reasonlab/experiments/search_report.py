"""The search experiment's results, read: each strategy's per-problem cells, Snell et al.'s compute-optimal choice
per k, and the two pages (the search and the verifiers' quality) with their tables and plots. `search.py` holds the
experiment (its config, run and claims); this file holds what its claims and render read."""
from __future__ import annotations

import os
import warnings

import numpy as np

from ..io.pack import unpack_bits, unpack_ints
from ..io.report import log_x, md_table, plt, save
from ..stats import findings
from ..stats.summary import pm
from ..tasks import Task
from . import opening, reading, reused, task_of

FIRST = "first_error_auroc"
"""the verifiers' step AUROC the page leads with: on the steps up to each output's first error (verifier_quality)"""
TRAIN_KEYS = ("seconds", "n_outputs", "n_steps", "positive_share", "loss_first", "loss_last")
"""what the quality record keeps of a verifier's training metadata"""


# ---------------------------------------------------------------------------------------------------------------
# Reading results: accuracy and compute per strategy, the compute-optimal choice per k.

def cell(res: dict, name: str, N, split: str = "test") -> dict | None:
    """One strategy's stored per-problem strings at one N and split (None where it did not run)."""
    d = res["strategies"].get(name, {}).get(split, {})
    return d.get(int(N), d.get(str(N)))      # int keys once read back from the store, str when fresh


@reused
def per_problem(res: dict, name: str, N, split: str = "test", k: int | None = None):
    """(correct (P,), generated tokens (P,), verifier tokens (P,), FLOPs (P,)) of one strategy, k = one k or all."""
    c = cell(res, name, N, split)
    ks = np.array(res["k"][split])
    m = np.ones(len(ks), bool) if k is None else ks == k
    gen, ver = unpack_ints(c["gen"])[m], unpack_ints(c["ver"])[m]
    vk = name.split("/")[1] if "/" in name else None
    flops = 2 * res["n_params"] * (task_of(res).prompt_len + gen) + (2 * res["ver_params"][vk] * ver if vk else 0.0)
    return unpack_bits(c["correct"])[m].astype(float), gen, ver, flops


def strategies(res: dict) -> list[tuple[str, int]]:
    """Every (strategy, N) of a result, as its test split has them."""
    return [(name, int(N)) for name, d in res["strategies"].items() for N in d["test"]]


@reused
def compute_optimal(res: dict, targets=(0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99), oracle: bool = False) -> list[dict]:
    """Snell et al.'s compute-optimal strategy per k against the best single strategy, at matched accuracy.

    Candidates: every method x learned verifier x N, greedy and majority included (the oracle's strategies only with
    oracle=True: no deployed system has the rule); cost = generated + verifier tokens. A per-k choice maximises
    accuracy - lambda * cost at each k (a Lagrangian sweep over lambda traces the per-k frontier). Choosing one of
    ~60 candidates per k on a few validation problems overfits, so each lambda's accuracy is cross-fitted: chosen on
    one half of the validation problems, scored on the other, both ways. For each target overall accuracy: the
    cheapest lambda whose cross-fitted accuracy reaches it (its choice then made on all validation problems), and
    the cheapest single strategy whose validation accuracy reaches it; both are read on the test problems, where
    the report puts their accuracies beside the token ratio. Overall accuracy and cost are means over k."""
    ks = sorted(set(res["k"]["test"]))
    pts = []
    for name, N in strategies(res):
        if cell(res, name, N, "val") is None or (name.endswith("/oracle") and not oracle):
            continue
        row = {"name": name, "N": N}
        for split in ("val", "test"):
            whole, at = per_problem(res, name, N, split), np.array(res["k"][split])   # unpacked once, cut per k
            row[split] = {k: tuple(a[at == k] for a in whole) for k in ks}
        pts.append(row)

    # (candidates, problems at k) per split and k: correct, and generated + verifier tokens
    grid = {split: {k: (np.stack([p[split][k][0] for p in pts]), np.stack([p[split][k][1] + p[split][k][2] for p in pts]))
                    for k in ks} for split in ("val", "test")}

    def means(split, rows=None):                # (acc, cost) per k: arrays over the candidates
        r = {k: slice(None) for k in ks} if rows is None else rows
        return {k: (grid[split][k][0][:, r[k]].mean(1), grid[split][k][1][:, r[k]].mean(1)) for k in ks}

    n_val = {k: len(pts[0]["val"][k][0]) for k in ks}
    halves = [{k: np.arange(n_val[k]) % 2 == h for k in ks} for h in (0, 1)]
    val, test, half = means("val"), means("test"), [means("val", h) for h in halves]

    def choose(lam, tab) -> dict[int, int]:     # per k, the candidate maximising acc - lam * cost (ties: cheaper)
        return {k: int(np.lexsort((tab[k][1], -(tab[k][0] - lam * tab[k][1])))[0]) for k in ks}

    def overall(choice, tab):
        return float(np.mean([tab[k][0][choice[k]] for k in ks])), float(np.mean([tab[k][1][choice[k]] for k in ks]))

    sweep = []
    for lam in [0.0, *np.logspace(-6, 0, 61)]:
        cross = [overall(choose(lam, half[h]), half[1 - h]) for h in (0, 1)]
        sweep.append((lam, float(np.mean([a for a, _ in cross])), float(np.mean([c for _, c in cross]))))
    single = [overall({k: i for k in ks}, val) for i in range(len(pts))]
    out = []
    for t in targets:
        ad = [s for s in sweep if s[1] >= t]
        fixed = [i for i, (a, _) in enumerate(single) if a >= t]
        if not ad or not fixed:
            out.append({"target": t, "reachable": False})
            continue
        chosen = choose(min(ad, key=lambda s: s[2])[0], val)
        best = min(fixed, key=lambda i: single[i][1])
        (a_test, c_test), (f_test, fc_test) = overall(chosen, test), overall({k: best for k in ks}, test)
        name = lambda i: f"{pts[i]['name']}@{pts[i]['N']}"      # noqa: E731
        out.append({"target": t, "reachable": True, "chosen": {k: name(i) for k, i in chosen.items()},
                    "fixed": name(best), "test_acc": a_test, "test_cost": c_test, "fixed_test_acc": f_test,
                    "fixed_test_cost": fc_test})
    return out


def table(results: list[dict], Ns=(1, 4, 16, 64)) -> str:
    """Test accuracy (mean ± std over seeds) per strategy at a few N, with compute at the largest."""
    nmax = max(int(n) for n in results[0]["strategies"]["majority"]["test"])
    Ns = [n for n in Ns if n <= nmax]
    header = ["strategy", *(f"acc @{n}" for n in Ns), f"generated tokens @{Ns[-1]}", f"verifier tokens @{Ns[-1]}",
              f"GFLOPs @{Ns[-1]}"]
    rows = []
    for name in results[0]["strategies"]:
        cells, last = [], None
        for N in Ns:
            if name == "greedy" and N > 1:     # one answer: compute stays that of N = 1
                cells.append("—")
                continue
            per = [per_problem(r, name, N) for r in results]
            cells.append(pm([p[0].mean() for p in per]))
            last = per
        gen, ver, flops = (np.mean([p[i].mean() for p in last]) for i in (1, 2, 3))
        rows.append([name, *cells, f"{gen:.1f}", f"{ver:.1f}", f"{flops / 1e9:.3f}"])
    return md_table(header, rows)


def frontier_table(results: list[dict]) -> str:
    """Compute-optimal against the best single strategy at every target: test accuracy and tokens of each, first
    seed (the claim reads one target over all seeds)."""
    rows = [[t["target"], f"{t['test_acc']:.3f} / {t['test_cost']:.0f}",
             f"{t['fixed_test_acc']:.3f} / {t['fixed_test_cost']:.0f}", t["fixed"]] if t["reachable"]
            else [t["target"], "not reached", "", ""] for t in compute_optimal(results[0])]
    return md_table(["target", "per-k choice: test acc / tokens", "best single: test acc / tokens", "single strategy"],
                    rows)


def verifier_cost_table(results: list[dict]) -> str:
    """Verifier tokens per problem at the largest N: read from the start (the comparisons) against a causal
    verifier that keeps its cache (the sensitivity row)."""
    nmax = max(int(n) for n in results[0]["strategies"]["majority"]["test"])
    rows = []
    for name in results[0]["strategies"]:
        c = [cell(r, name, nmax) for r in results]
        if "/" not in name or any(x is None or "ver_inc" not in x for x in c):
            continue
        full = np.mean([unpack_ints(x["ver"]).mean() for x in c])
        inc = np.mean([unpack_ints(x["ver_inc"]).mean() for x in c])
        rows.append([f"{name}@{nmax}", f"{full:.0f}", f"{inc:.0f}"])
    return md_table(["strategy", "verifier tokens, re-read", "verifier tokens, incremental"], rows)


def search_page(results: list[dict], out: str, fs: list[dict]) -> str:
    """The search section: plots (out/search/: acc_vs_n.png, acc_vs_compute.png, tokens.png), the tables and the
    findings `fs` (search_claims(results))."""
    plot_curves(results, os.path.join(out, "search", "acc_vs_n.png"), "N")
    plot_curves(results, os.path.join(out, "search", "acc_vs_compute.png"), "flops")
    plot_tokens(results, os.path.join(out, "search", "tokens.png"))
    c = results[0]["config"]
    P = len(results[0]["k"]["test"])
    task, k0 = task_of(results[0]), min(results[0]["k"]["test"])
    whole = (f', whose "test" quarter holds {len(task.space(k0, "test"))}' if task.enumerable(k0) else "")
    return f"""## Verifiers and search

{opening("search")}

![accuracy against N](search/acc_vs_n.png)

![accuracy against compute](search/acc_vs_compute.png)

![accuracy against generated and verifier tokens](search/tokens.png)

{table(results)}

{P} distinct test problems (up to {c['n_test']} per k; {results[0]['k']['test'].count(k0)} at k = {k0}{whole})
and up to {c['n_val']} validation problems per k, from the "test" and "val" quarters of the problem space (no
verifier trains on them); the {c['thinker']} thinker writes forced {c['force']} chains at temperature
{c['temperature']}; seeds {', '.join(str(r['seed']) for r in results)} (mean ± std over seeds). Every method
scores an output by `{c['agg']}` of its step scores. Beam search and DVTS are search-and-learn's (M = {c['width']};
`beam_dedup` with its filter_duplicates). Compute: generated tokens include the forced format token; verifier
tokens = prompt + output per scored sequence, every round re-read; FLOPs = 2 · P_gen · (prompt + generated) +
2 · P_ver · verifier tokens. Chance (the best blind guess) is
{chance_text(task, sorted(set(results[0]['k']['test'])))}.

**Compute-optimal per k against the best single strategy** (first seed; the per-k choice is cross-fitted on the
validation problems, both are read on test):

{frontier_table(results)}

**Verifier cost, a sensitivity row**: a causal verifier that keeps its cache reads each step once:

{verifier_cost_table(results)}

**Findings** (95 % t intervals over seeds of each seed's statistic): first the premises, what the claims rest on
(best-of-N with a learned verifier that falls from N = 1 to N = {c['n_max']}, its interval wholly below 0, makes the
claims that read it untestable), then the primary claim, whose control is majority voting over the same samples and
whose placebo weighs the vote with a verifier that scores every step alike (weighted voting is then majority voting,
ties and all), then the secondary ones:

{findings.table(fs)}

{reading("search")}
"""


def headline(results: list[dict], fs: list[dict]) -> str:
    """One line for the lab's summary table, computed from the findings (`fs`: the search claims, judged)."""
    nmax = max(int(n) for n in results[0]["strategies"]["majority"]["test"])
    acc = {n: np.mean([per_problem(r, n, nmax if n != "greedy" else 1)[0].mean() for r in results])
           for n in ("greedy", "majority", "weighted/prm", "bon/oracle") if cell(results[0], n, 1)}
    fs = [f for f in fs if findings.kind_of(f) != findings.PREMISE]
    held = sum(findings.as_judged(f)["verdict"] == findings.HOLDS for f in fs)      # as the lab judged them
    return (", ".join(f"{n} {v:.3f}" for n, v in acc.items()) + f" (N = {nmax}); {held}/{len(fs)} findings hold")


# ---------------------------------------------------------------------------------------------------------------
# The search section's plots.

METHOD_COLOR = {"greedy": "k", "majority": "#555555", "bon": "#4C72B0", "weighted": "#DD8452", "beam": "#55A868",
                "beam_dedup": "#8172B2", "dvts": "#C44E52"}
VER_STYLE = {"prm": "-", "oracle": ":", "orm": "--", "prm-mc": "-.", None: "-"}


def curve(results: list[dict], name: str, x: str = "N", k: int | None = None):
    """Per N: x (N, mean FLOPs or tokens over seeds) and test accuracy mean and std over seeds."""
    Ns = sorted(int(n) for n in results[0]["strategies"][name]["test"])
    xs, m, s = [], [], []
    for N in Ns:
        per = [per_problem(r, name, N, k=k) for r in results]
        acc = [p[0].mean() for p in per]
        xv = {"N": N, "flops": np.mean([p[3].mean() for p in per]), "gen": np.mean([p[1].mean() for p in per]),
              "ver": np.mean([p[2].mean() for p in per])}[x]
        xs.append(xv)
        m.append(float(np.mean(acc)))
        s.append(float(np.std(acc, ddof=1)) if len(acc) > 1 else 0.0)
    return np.array(xs), np.array(m), np.array(s)


def chance(res: dict, k: int | None = None) -> float:
    """The best blind guess's accuracy on the test problems (`Task.chance`; of one k, or over all of them)."""
    task = task_of(res)
    if k is not None:
        return task.chance(k)
    return float(np.mean([task.chance(kk) for kk in res["k"]["test"]]))


def chance_text(task: Task, ks: list[int]) -> str:
    """Chance in words: one number where it is the same at every k (digits: 0.1), else its range over k."""
    cs = [task.chance(k) for k in ks]
    return f"{cs[0]:.3g}" if len(set(cs)) == 1 else f"{min(cs):.3g} to {max(cs):.3g} (by k)"


def plot_curves(results: list[dict], path: str, x: str = "N") -> str:
    """Test accuracy against N (or FLOPs) for every strategy; one panel for all k, then one per k; band = ± std
    over seeds; grey: chance (`Task.chance`; digits: 0.1)."""
    ks = sorted(set(results[0]["k"]["test"]))
    panels = [None] + ks
    cols = 4
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), sharey=True, squeeze=False)
    fig.subplots_adjust(hspace=0.4)
    names = list(results[0]["strategies"])
    for ax, k in zip(axes.flat, panels):
        for name in names:
            meth, _, ver = name.partition("/")
            xs, m, s = curve(results, name, x, k)
            if name == "greedy":
                ax.axhline(m[0], color="k", lw=1, label="greedy")
                continue
            line, = ax.plot(xs, m, ls=VER_STYLE.get(ver or None, "-"), color=METHOD_COLOR[meth], marker="o", ms=2,
                            label=name)
            ax.fill_between(xs, m - s, m + s, color=line.get_color(), alpha=0.12)
        c = chance(results[0], k)
        ax.axhline(c, color="grey", ls=":", lw=1, label=f"chance ({c:.3g})")
        log_x(ax, 2 if x == "N" else 10)
        ax.set_title("all k" if k is None else f"k = {k}", fontsize=9)
        ax.set_xlabel({"N": "N (samples / beams)", "flops": "FLOPs per problem (generator + verifier)"}[x], fontsize=8)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    axes[0, 0].set_ylabel("test accuracy")
    axes[0, 0].legend(fontsize=5.5, ncol=2, loc="lower right")
    r0 = results[0]["config"]
    fig.suptitle(f"{r0['thinker']} thinker, forced {r0['force']}, M = {r0['width']}, {len(results)} seed(s); "
                 f"solid: learned PRM, dotted: oracle, dashed: ORM, dash-dot: Math-Shepherd PRM", fontsize=9)
    return save(fig, path)


def plot_tokens(results: list[dict], path: str) -> str:
    """All k: test accuracy against generated tokens and against verifier tokens per problem."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    for ax, x in zip(axes, ("gen", "ver")):
        for name in results[0]["strategies"]:
            meth, _, ver = name.partition("/")
            if x == "ver" and not ver:
                continue
            xs, m, _ = curve(results, name, x)
            ax.plot(np.maximum(xs, 1), m, ls=VER_STYLE.get(ver or None, "-"), color=METHOD_COLOR[meth], marker="o",
                    ms=2, label=name)
        ax.axhline(chance(results[0]), color="grey", ls=":", lw=1)
        log_x(ax)
        ax.set_xlabel({"gen": "generated tokens per problem", "ver": "verifier tokens per problem"}[x])
    axes[0].set_ylabel("test accuracy (all k)")
    axes[1].legend(fontsize=6, ncol=2)
    return save(fig, path)


# ---------------------------------------------------------------------------------------------------------------
# The verifiers' section: their quality (step and outcome AUROC, calibration, training cost) over seeds.

def _seed_check(per_seed, test, thr) -> tuple[float, float, float, str]:
    """findings.seed_interval over the seeds that have a value (an AUROC is NaN when a class is missing), judged by
    test (findings.greater / at_most): mean, CI, verdict."""
    xs = [x for x in per_seed if x == x]
    if len(xs) < 2:
        return float(np.mean(xs)) if xs else float("nan"), float("nan"), float("nan"), \
            "inconclusive (fewer than 2 seeds)"
    m, ci = findings.seed_interval(xs)
    return m, ci[0], ci[1], test(ci, thr)


def plot_quality(results: list[dict], path: str) -> str:
    """Reliability diagram (bins pooled over seeds; diagonal = calibrated) and step AUROC per k (mean, min..max
    over seeds; 0.5 = chance)."""
    kinds = list(results[0]["kinds"])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    a1.plot([0, 1], [0, 1], color="grey", ls=":", lw=1, label="calibrated")
    for kind in kinds:
        pooled: dict[float, list] = {}
        for r in results:
            for b in r["kinds"][kind]["step_bins"]:
                pooled.setdefault(b["lo"], []).append(b)
        xs = sorted(pooled)
        n = [sum(b["n"] for b in pooled[x]) for x in xs]
        sc = [sum(b["score"] * b["n"] for b in pooled[x]) / m for x, m in zip(xs, n)]
        pos = [sum(b["positive"] * b["n"] for b in pooled[x]) / m for x, m in zip(xs, n)]
        a1.plot(sc, pos, marker="o", ms=3, label=kind)
        ks = sorted(int(k) for k in results[0]["kinds"][kind]["step_auroc_by_k"])
        y = np.array([[r["kinds"][kind]["step_auroc_by_k"][str(k) if str(k) in r["kinds"][kind]["step_auroc_by_k"]
                                                           else k] for k in ks] for r in results], dtype=float)
        with warnings.catch_warnings():   # a k where every seed lacks a class has no AUROC: a gap in the line
            warnings.simplefilter("ignore", RuntimeWarning)
            line, = a2.plot(ks, np.nanmean(y, 0), marker="o", ms=3, label=kind)
            a2.fill_between(ks, np.nanmin(y, 0), np.nanmax(y, 0), color=line.get_color(), alpha=0.15)
    a2.axhline(0.5, color="grey", ls=":", lw=1, label="chance (0.5)")
    a1.set_xlabel("verifier score (step)")
    a1.set_ylabel("share of steps right (oracle)")
    a1.set_title("calibration, held-out steps")
    a2.set_xlabel("k (problem size)")
    a2.set_ylabel("step AUROC vs oracle")
    a2.set_title("step AUROC per k")
    a1.legend(fontsize=8)
    a2.legend(fontsize=8)
    return save(fig, path)


def verifiers_page(results: list[dict], out: str, margin: float = 0.05, time_budget: float = 30.0) -> str:
    """The verifiers' section: quality table (mean ± std over seeds), the Math-Shepherd margin as a check, the plot."""
    kinds = list(results[0]["kinds"])
    plot_quality(results, os.path.join(out, "verifier_quality.png"))
    header = ["verifier", "step AUROC to the first error", "step AUROC, all steps", "chain-step AUROC",
              "step ECE to the first error", "outcome AUROC last / min / prod", "train s"]
    rows = []
    for kind in kinds:
        q = [r["kinds"][kind] for r in results]
        rows.append([kind, pm([x[FIRST] for x in q]), pm([x["step_auroc"] for x in q]),
                     pm([x["chain_step_auroc"] for x in q]),
                     pm([x["first_error_ece"] for x in q]),
                     " / ".join(pm([x["outcome_auroc"][a] for x in q]) for a in ("last", "min", "prod")),
                     pm([x["train"]["seconds"]["total"] for x in q], "{:.1f}")])
    lines = []
    if "prm" in kinds and "prm-mc" in kinds:
        gap = [r["kinds"]["prm"][FIRST] - r["kinds"]["prm-mc"][FIRST] for r in results]
        m, lo, hi, verdict = _seed_check(gap, findings.at_most, margin)
        lines.append(f"Math-Shepherd labels within {margin} step AUROC (to the first error) of the oracle-label PRM: "
                     f"gap (prm − prm-mc) "
                     f"{m:.3f}, 95 % CI [{lo:.3f}, {hi:.3f}] over {len(gap)} seeds (per seed "
                     + ", ".join(f"{g:.3f}" for g in gap) + f"): **{verdict}**.")
    if "prm" in kinds and "orm" in kinds:
        gap = [r["kinds"]["prm"][FIRST] - r["kinds"]["orm"][FIRST] for r in results]
        m, lo, hi, verdict = _seed_check(gap, findings.greater, 0.0)
        lines.append(f"The PRM separates steps better than the ORM (step AUROC to the first error, gap prm − orm > 0): "
                     f"{m:.3f}, 95 % CI "
                     f"[{lo:.3f}, {hi:.3f}] (per seed " + ", ".join(f"{g:.3f}" for g in gap) + f"): **{verdict}**.")
    secs = [r["kinds"][k]["train"]["seconds"]["total"] for r in results for k in kinds]
    lines.append(f"Each verifier trains in ≤ {time_budget:g} s: slowest {max(secs):.1f} s, fastest {min(secs):.1f} s "
                 f"(sampling, labels and fitting; the kinds of a seed share one draw of samples, whose time the first "
                 f"kind carries; wall time of the run that made the results): "
                 f"**{'holds' if max(secs) <= time_budget else 'does not hold'}**.")
    n_out = results[0]["kinds"][kinds[0]]["n_outputs"]
    seeds = ", ".join(str(r["seed"]) for r in results)
    return f"""## Verifiers: learned ORM and PRMs against the oracle

> **Question.** A verifier learned from the thinker's own samples scores each chain step. How well do its
> scores separate right steps from wrong ones, and are they calibrated?

![verifier quality](verifier_quality.png)

{md_table(header, rows)}

{chr(10).join(l + chr(10) for l in lines)}
The {results[0]['thinker']} thinker's samples (temperature 1, formats forced S / T / A) of held-out problems
({n_out} outputs per seed, problems from a quarter of problem space no verifier trains on); seeds {seeds};
mean ± std over seeds. Step AUROC: steps (chain states and the answer) scored against the rule's step labels (0.5 =
chance), on the steps up to each output's first wrong step (what PRM800K labels, and all a weakest-step score reads:
a step after an error is wrong by inheritance) and on all steps; outcome AUROC: the aggregated score against the
final answer being right. ECE over 10 equal-width bins (the reliability plot: all steps). The ORM learns from the
outcome only (every
step), the PRM from the rule's step labels up to the first error, prm-mc from rollout shares (every step).

*Papers:* ORM (Cobbe et al. 2021, arXiv 2110.14168); PRM (Lightman et al. 2023, arXiv 2305.20050);
Math-Shepherd (Wang et al. 2023, arXiv 2312.08935).
*Explore:* `VerifierConfig(rollouts=..., steps=..., init="scratch")`, `verifier_quality(v, thinker)`.
"""
