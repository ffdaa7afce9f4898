"""Plots (matplotlib, Agg backend) and small statistics helpers shared by the experiments."""
from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

FMT_COLORS = {"direct": "#4C72B0", "short": "#DD8452", "full": "#55A868"}
FMT_LABEL = {"direct": "A (direct)", "short": "S (short chain)", "full": "T (full chain)"}


def save(fig, path: str) -> str:
    """Write a figure atomically (temp file + rename) and close it."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    os.replace(tmp, path)
    plt.close(fig)
    return path


def mean_std(xs) -> tuple[float, float]:
    a = np.asarray(xs, dtype=float)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0


def bootstrap_ci(x, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of x."""
    x = np.asarray(x, dtype=float)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(1)
    return float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


def plot_rl_runs(runs: dict[str, list[list[dict]]], path: str, title: str = "") -> str:
    """Reward, accuracy, length and KL over steps; one line per method (mean over seeds, band = min..max)."""
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.6))
    for name, hists in runs.items():
        for ax, key in zip(axes, ("reward", "acc", "length", "kl_exact")):
            n = min(len(h) for h in hists)
            y = np.array([[r.get(key, np.nan) for r in h[:n]] for h in hists])
            x = np.arange(1, n + 1)
            line, = ax.plot(x, y.mean(0), label=name)
            if len(hists) > 1:
                ax.fill_between(x, y.min(0), y.max(0), color=line.get_color(), alpha=0.15)
    for ax, t in zip(axes, ("reward", "sample accuracy", "mean output length (tokens)", "KL(pi || ref), exact")):
        ax.set_title(t)
        ax.set_xlabel("step")
    axes[1].axhline(0.1, color="grey", ls=":", lw=1, label="chance (0.1)")
    axes[1].legend(fontsize=8)
    if title:
        fig.suptitle(title, y=1.03)
    return save(fig, path)


def plot_format_share(hist: list[dict], path: str, title: str = "") -> str:
    """Format share over steps (stacked area) and format share by k at the last step (stacked bars)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 3.6), gridspec_kw={"width_ratios": [2, 1]})
    recs = [h for h in hist if "share" in h]
    x = [h["step"] for h in recs]
    a.stackplot(x, *[[h["share"][f] for h in recs] for f in FMT_COLORS], colors=list(FMT_COLORS.values()),
                labels=[FMT_LABEL[f] for f in FMT_COLORS])
    a.set_xlabel("step")
    a.set_ylabel("share of samples")
    a.set_ylim(0, 1)
    a.legend(loc="lower left", fontsize=8)
    a.set_title("format chosen while sampling")
    tail = recs[-max(1, len(recs) // 10):]            # a step has only 16 problems: pool the last 10 % of steps
    ks = sorted({int(k) for h in tail for k in h["share_by_k"]})
    bottom = np.zeros(len(ks))
    for f, c in FMT_COLORS.items():
        v = np.array([np.mean([h["share_by_k"][k][f] for h in tail for k in h["share_by_k"] if int(k) == kk])
                      for kk in ks])
        b.bar(ks, v, bottom=bottom, color=c)
        bottom += v
    b.set_xlabel("k (digits)")
    b.set_ylim(0, 1)
    b.set_title(f"format by k, steps {tail[0]['step']}-{tail[-1]['step']}")
    if title:
        fig.suptitle(title, y=1.03)
    return save(fig, path)
