"""The experiments' larger figures, kept out of their modules so that each reads as config, run, claims and
render: L1's budget plots."""
from __future__ import annotations

import numpy as np

from ..io.report import plt, save
from ..methods.budget import BUDGETS, STRIDE_GROUPS, ks_of, methods_of, needs, variants_of


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
