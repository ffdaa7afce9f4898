"""The experiments' larger figures, kept out of their modules so that each reads as config, run, claims and
render: L1's budget plots and the search curves."""
from __future__ import annotations

import numpy as np

from ..io.report import log_x, plt, save
from ..methods.budget import BUDGETS, STRIDE_GROUPS, ks_of, methods_of, needs, variants_of
from ..methods.search import per_problem


def plot_accuracy(results: list[dict], path: str) -> str:
    """Accuracy against budget per k, one line per method (mean over seeds, band = min..max), chance dashed."""
    ks, ms = ks_of(results[0]), [methods_of(r) for r in results]
    fig, axes = plt.subplots(2, 4, figsize=(16, 7.5), sharey=True, layout="constrained")
    for ax, k in zip(axes.flat, ks):
        for name in ms[0]:
            acc = np.array([[m[name][b][k]["acc"] for b in BUDGETS] for m in ms])
            style = ":" if name.startswith("always") else "--" if name.startswith("s1") else "-"
            ax.plot(BUDGETS, acc.mean(0), style, marker="o" if style == "-" else None, ms=3, label=name)
            if style == "-":
                ax.fill_between(BUDGETS, acc.min(0), acc.max(0), alpha=0.15)
        ax.axhline(0.1, color="grey", lw=0.8, ls="--")
        ax.axvline(needs(k) - 0.5, color="k", lw=0.5, alpha=0.4)
        ax.set_title(f"k = {k} (S needs {needs(k)} steps)")
        ax.set_xlabel("budget b (chain steps)")
    axes.flat[0].set_ylabel("greedy accuracy")
    axes.flat[-1].axis("off")
    h, lab = axes.flat[0].get_legend_handles_labels()
    axes.flat[-1].legend(h + [plt.Line2D([], [], color="grey", ls="--")], lab + ["chance 0.1"], loc="center")
    fig.suptitle("Accuracy against budget (mean over seeds, band = min..max; vertical line: b = ceil(k/2))")
    return save(fig, path)


def plot_strides(results: list[dict], path: str) -> str:
    """Stride mix of the trained models' chains, by budget (x) and k (panels), mean over seeds."""
    vs, ks = variants_of(results[0]), ks_of(results[0])
    colors = dict(zip(STRIDE_GROUPS, ["#4C72B0", "#55A868", "#DD8452", "#C44E52", "#8172B2", "#937860", "#999999"]))
    fig, axes = plt.subplots(len(vs), len(ks), figsize=(2.3 * len(ks), 2.4 * len(vs) + 0.6), sharey=True, squeeze=False,
                             layout="constrained")
    for i, v in enumerate(vs):
        for j, k in enumerate(ks):
            ax, bottom = axes[i][j], np.zeros(len(BUDGETS))
            for g in STRIDE_GROUPS:
                y = np.array([np.mean([r["variants"][v]["eval"][b][k]["strides"].get(g, 0.0) for r in results])
                              for b in BUDGETS])
                ax.bar(BUDGETS, y, bottom=bottom, color=colors[g], label=g, width=0.85)
                bottom += y
            ax.axvline(needs(k) - 0.5, color="k", lw=0.8)
            ax.set_title(f"L1-{v}, k = {k}", fontsize=8)
            ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=6, loc="lower left")
    fig.supxlabel("budget b (vertical line: b = ceil(k/2))")
    fig.supylabel("share of outputs")
    return save(fig, path)


def plot_adherence(results: list[dict], path: str) -> str:
    """Left: steps written against budget (mean over k and seeds) per method, diagonal = exact adherence.
    Right: share within budget during training, per variant (mean over budgets and seeds)."""
    ks, ms = ks_of(results[0]), [methods_of(r) for r in results]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5), layout="constrained")
    for name in ms[0]:
        if name.startswith("always"):
            continue
        y = np.array([[np.mean([m[name][b][k]["steps"] for k in ks]) for b in BUDGETS] for m in ms])
        a1.errorbar(BUDGETS, y.mean(0), yerr=y.std(0), marker="o", ms=3, capsize=2, label=name)
    a1.plot(BUDGETS, BUDGETS, "k:", lw=0.8, label="steps = b")
    a1.set_xlabel("budget b")
    a1.set_ylabel("chain steps written (mean over k = 2..8)")
    a1.legend(fontsize=8)
    for v in variants_of(results[0]):
        logs = [r["variants"][v]["logs"] for r in results]
        steps = [l["step"] for l in logs[0]]
        y = np.array([[np.mean([c["within"] for c in l["by_budget"].values()]) for l in lg] for lg in logs])
        a2.plot(steps, y.mean(0), marker="o", ms=3, label=f"L1-{v}")
    a2.set_xlabel("GRPO step (step 0: greedy, before RL)")
    a2.set_ylabel("share within budget (steps <= b)")
    a2.set_ylim(0, 1.02)
    a2.legend(fontsize=8)
    fig.suptitle("Adherence: steps against budget after training; share within budget during training")
    return save(fig, path)


METHOD_COLOR = {"greedy": "k", "majority": "#555555", "bon": "#4C72B0", "weighted": "#DD8452", "beam": "#55A868",
                "beam_dedup": "#8172B2",
                "dvts": "#C44E52"}


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


def plot_curves(results: list[dict], path: str, x: str = "N") -> str:
    """Test accuracy against N (or FLOPs) for every strategy; one panel for all k, then one per k; band = ± std
    over seeds; grey: chance (0.1)."""
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
        ax.axhline(0.1, color="grey", ls=":", lw=1, label="chance (0.1)")
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
        ax.axhline(0.1, color="grey", ls=":", lw=1)
        log_x(ax)
        ax.set_xlabel({"gen": "generated tokens per problem", "ver": "verifier tokens per problem"}[x])
    axes[0].set_ylabel("test accuracy (all k)")
    axes[1].legend(fontsize=6, ncol=2)
    return save(fig, path)
