"""The experiments' larger figures, kept out of their modules so that each reads as config, run, claims and
render: the search curves."""
from __future__ import annotations

import numpy as np

from ..io.report import log_x, plt, save
from ..methods.search import per_problem

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
