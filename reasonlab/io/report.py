"""Plots (matplotlib, Agg backend), report.md and the self-contained report.html."""
from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import tempfile

import markdown
import numpy as np

from ..core.task import FMT_COLOR, FMT_LABEL, FMT_NAMES, FORMATS, FREE_COLOR
from ..stats.summary import pareto, pm
from .checkpoint import atomic_write, write_text
from .files import writable_config_home

if not writable_config_home("matplotlib"):     # an unwritable HOME: a private config dir, instead of a warning
    os.environ["MPLCONFIGDIR"] = tempfile.mkdtemp(prefix="reasonlab-matplotlib-")
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullLocator  # noqa: E402

# plot colours by format token, and for free generation
TOKEN_COLOR = {**{tok: FMT_COLOR[name] for name, tok in FORMATS.items()}, "free": FREE_COLOR}


DPI = 90
"""Pixels per inch of every plot: sharp on a screen, small enough that results/ stays a few MB."""


def md_table(header: list[str], rows: list[list]) -> str:
    """A markdown table: the header, its rule and a line per row (cells are written as given: format numbers first)."""
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(str, r)) + " |" for r in rows])


def save(fig, path: str) -> str:
    """Write a figure atomically (temp file + rename) and close it. A figure with a layout engine (constrained) is
    saved as laid out: bbox_inches="tight" would measure every artist once more, a large share of a many-panel
    figure's drawing time."""
    tight = {} if fig.get_layout_engine() is not None else {"bbox_inches": "tight"}
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=DPI, format="png", pil_kwargs={"optimize": True}, **tight))
    finally:
        plt.close(fig)
    return path


def log_x(ax, base: float = 10) -> None:
    """A log-scale x axis without minor ticks: on a many-panel figure they are hundreds of tick artists, about a
    third of its drawing time (search's accuracy-against-FLOPs figure)."""
    ax.set_xscale("log", base=base)
    ax.xaxis.set_minor_locator(NullLocator())


def band(ax, x, ys, alpha: float = 0.15, **line):
    """ys (seeds, len(x)): their mean as a line (`line`: ax.plot's options) and their min..max as a band in its
    colour, NaNs skipped. Returns the line."""
    y = np.asarray(ys, dtype=float)
    drawn, = ax.plot(x, np.nanmean(y, 0), **line)
    ax.fill_between(x, np.nanmin(y, 0), np.nanmax(y, 0), color=drawn.get_color(), alpha=alpha)
    return drawn


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
    a.stackplot(x, *[[h["share"][f] for h in recs] for f in FMT_NAMES], colors=list(FMT_COLOR.values()),
                labels=[FMT_LABEL[f] for f in FMT_NAMES])
    a.set_xlabel("step")
    a.set_ylabel("share of samples")
    a.set_ylim(0, 1)
    a.legend(loc="lower left", fontsize=8)
    a.set_title("format chosen while sampling")
    tail = recs[-max(1, len(recs) // 10):]            # a step has only 16 problems: pool the last 10 % of steps
    ks = sorted({int(k) for h in tail for k in h["share_by_k"]})
    bottom = np.zeros(len(ks))
    for f, c in FMT_COLOR.items():
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


def rl_table(runs: list[dict]) -> str:
    """GRPO / REINFORCE / ... results: one row per algorithm, mean ± std over the seeds in `runs`."""
    rows = ["| algo | greedy acc (k = 2..8) | min over k | greedy share A / S / T | greedy length | solved (acc ≥ 0.99) "
            "| steps to solve | seconds to solve | sampled acc, last 10 steps | sampled share A | KL to base (exact) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for algo in dict.fromkeys(r["algo"] for r in runs):
        rs = [r for r in runs if r["algo"] == algo]
        solved = [r for r in rs if r["solved"]]
        steps = pm([r["solved"]["step"] for r in solved], "{:.0f}") if solved else "—"
        secs = pm([r["solved"]["seconds"] for r in solved], "{:.1f}") if solved else "—"
        share = " / ".join(pm([r["share"][f] for r in rs], "{:.2f}") for f in FMT_NAMES)
        rows.append(f"| {algo} | {pm([r['acc'] for r in rs])} | {pm([min(r['acc_by_k'].values()) for r in rs])} | {share} "
                    f"| {pm([r['length'] for r in rs], '{:.2f}')} | {len(solved)}/{len(rs)} | {steps} | {secs} "
                    f"| {pm([r['sampled_last10']['acc'] for r in rs])} | {pm([r['sampled_last10']['direct'] for r in rs], '{:.2f}')} "
                    f"| {pm([r['sampled_last10']['kl_exact'] for r in rs], '{:.3f}')} |")
    base = [r["base_acc"] for r in runs if r["algo"] == runs[0]["algo"]]
    rows.append(f"\nBase model (free, greedy): accuracy {pm(base)}. Chance: 0.1. Mean ± std over seeds "
                f"{sorted({r['seed'] for r in runs})}.")
    return "\n".join(rows)


def plot_adaptive_heatmap(summary: dict, path: str) -> str:
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


def plot_adaptive_frontier(summary: dict, path: str) -> str:
    """Accuracy against mean generated tokens: one point per method (mean +- std over seeds), the fixed formats,
    test-time-compute points, and the Pareto front; the right panel zooms in on the learned policies."""
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
        for name, v in summary.get("tts", {}).items():
            ax.scatter(v["tokens"], v["acc"], marker="^", s=30, color="grey", zorder=3)
            ax.annotate(name, (v["tokens"], v["acc"]), textcoords="offset points", xytext=(4, 3), fontsize=7, color="grey")
        ax.plot([t for t, _ in line], [a for _, a in line], color="k", lw=1, ls="--", label="Pareto front")
        ax.set_xlabel("mean generated tokens per problem")
    axes[0].axhline(0.1, color="grey", ls=":", lw=1, label="chance (0.1)")
    log_x(axes[0])
    axes[0].set_ylabel("greedy accuracy (k = 2..8)")
    axes[0].set_title("the whole plane (log tokens)", fontsize=9)
    axes[1].set_xlim(6.0, 7.0)
    axes[1].set_ylim(0.97, 1.004)
    axes[1].set_title("zoom: learned policies against always-S", fontsize=9)
    axes[1].legend(fontsize=7, loc="lower right")
    return save(fig, path)


def adaptive_table(summary: dict) -> str:
    ks = list(next(iter(summary["methods"].values()))["share_by_k"])
    rows = ["| method | accuracy | mean tokens | on the front | ≥ always-S accuracy at fewer tokens | A-share by k (" + ", ".join(map(str, ks)) + ") |",
            "|---|---|---|---|---|---|"]
    for m, v in summary["methods"].items():
        share = " ".join(f"{v['share_by_k'][k]['direct']:.2f}" for k in ks)
        rows.append(f"| {m} | {v['acc'][0]:.3f} ± {v['acc'][1]:.3f} | {v['tokens'][0]:.2f} ± {v['tokens'][1]:.2f} | "
                    f"{'yes' if v['on_front'] else 'no'} | {'yes' if v['beats_always_S'] else 'no'} | {share} |")
    for f, v in summary["fixed"].items():
        rows.append(f"| always {f} (forced, greedy) | {v['acc']:.3f} | {v['tokens']:.2f} | | | |")
    for n, v in summary["tts"].items():
        rows.append(f"| {n} (sampling, seed {summary['seeds'][0]}) | {v['acc']:.3f} | {v['tokens']:.2f} | | | |")
    rows.append("\nForced-A (direct) accuracy per k after training, mean over seeds (base model: "
                + " ".join(f"{summary['fixed']['A']['acc_by_k'][k]:.2f}" for k in ks) + "):"+ "\n")
    rows += [f"- {m}: " + " ".join(f"{v['direct_acc_by_k'][k]:.2f}" for k in ks) for m, v in summary["methods"].items()]
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------------------------------
# STaR.

def star_table(runs: dict[str, list[list[dict]]]) -> str:
    """STaR per round, one row per (variant, round), mean ± std over the seeds of each variant."""
    fmts = FMT_NAMES
    rows = ["| variant | round | free acc | forced A / S / T | free share A / S / T | used | kept A / S / T | right answer, wrong chain | kept via hint | round s |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for vname, hists in runs.items():
        for i in range(len(hists[0])):
            hs = [h[i] for h in hists]

            def ms(key, sub=None, f="{:.3f}"):
                return pm([h[key] if sub is None else h[key][sub] for h in hs], f)
            head = (f"| {vname} | {i if i else '0 (base)'} | {ms('free')} | {ms('A', f='{:.2f}')} / {ms('S', f='{:.2f}')} / "
                    f"{ms('T', f='{:.2f}')} | " + " / ".join(ms('share', f, '{:.2f}') for f in fmts))
            if i == 0:
                rows.append(head + " | | | | | |")
                continue
            rows.append(head + f" | {ms('used', f='{:.2f}')} | " + " / ".join(ms('fmt_mix', f, '{:.2f}') for f in fmts)
                        + f" | {ms('false_positive_rate')} | {ms('rationalized', f='{:.2f}')} | {ms('round_s', f='{:.1f}')} |")
    return "\n".join(rows)


def plot_star(runs: dict[str, list[list[dict]]], path: str) -> str:
    """Per variant: free accuracy per k over rounds (mean over seeds), share of problems used, kept format mix."""
    fig, axes = plt.subplots(1, 3, figsize=(16, 3.8))
    for name, hists in runs.items():
        rounds = [h["round"] for h in hists[0]]
        acc = np.array([[h["free"] for h in hist] for hist in hists])
        line = band(axes[0], rounds, acc, marker="o", label=name)
        used = np.array([[h.get("used", np.nan) for h in hist[1:]] for hist in hists])
        axes[1].plot(rounds[1:], used.mean(0), marker="o", color=line.get_color(), label=name)
    first = next(iter(runs.values()))
    ks = list(first[0][-1]["free_by_k"])
    for k in ks:
        axes[2].plot([h["round"] for h in first[0]], [np.mean([hist[i]["free_by_k"][k] for hist in first])
                                                      for i in range(len(first[0]))], marker=".", label=f"k={k}")
    axes[0].axhline(0.1, color="grey", ls=":", lw=1, label="chance")
    axes[0].set_title("free-format greedy accuracy (k = 2..8)")
    axes[1].set_title("share of problems that yield data")
    axes[2].set_title(f"free accuracy per k, {next(iter(runs))}")
    axes[2].axhline(0.1, color="grey", ls=":", lw=1)
    for ax in axes:
        ax.set_xlabel("round")
    axes[0].legend(fontsize=7)
    axes[2].legend(fontsize=6, ncol=2)
    return save(fig, path)


# ---------------------------------------------------------------------------------------------------------------
# The report.

REPORT_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1.5em;color:#222;line-height:1.45}h1{border-bottom:2px solid #ddd}h2{margin-top:2.2em;border-bottom:1px solid
#eee}img{max-width:100%;border:1px solid #eee;margin:.4em 0}table{border-collapse:collapse;margin:.8em 0;font-size:.86em}
th,td{border:1px solid #ccc;padding:.25em .55em;text-align:left}th{background:#f4f4f4}code{background:#f4f4f4;
padding:0 .25em;border-radius:3px}blockquote{color:#555;border-left:3px solid #ccc;margin-left:0;padding-left:1em}
td img{min-width:180px}"""


def write_report(out: str, md: str, title: str, html: bool = True) -> dict:
    """report.md (images linked) and a self-contained report.html (images embedded as data URIs), both atomic
    (html=False: report.md alone, and a stale report.html removed)."""
    paths = {"md": os.path.join(out, "report.md"), "html": os.path.join(out, "report.html")}
    write_text(paths["md"], md)
    if not html:
        if os.path.exists(paths["html"]):
            os.remove(paths["html"])
        return {"md": paths["md"], "html": None}

    def data(path: str) -> str:
        with open(os.path.join(out, path), "rb") as f:
            return f"data:image/png;base64,{base64.b64encode(f.read()).decode()}"
    md = re.sub(r"!\[([^\]]*)\]\(([^)]+\.png)\)", lambda m: f"![{m.group(1)}]({data(m.group(2))})", md)
    md = re.sub(r'(<img [^>]*src=")([^"]+\.png)"', lambda m: f'{m.group(1)}{data(m.group(2))}"', md)   # thumbnails
    body = markdown.markdown(md, extensions=["tables"])
    write_text(paths["html"], f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>"
                              f"<style>{REPORT_CSS}</style></head><body>\n{body}\n</body></html>\n")
    return paths


def screenshot(html: str, png: str, width: int = 1200, height: int = 12000, chromium: str | None = None) -> str:
    """Render html in headless Chromium (flags as this machine's browser tests need) and save a PNG."""
    exe = chromium or shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if exe is None:
        raise FileNotFoundError("no Chromium found (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as prof:
        subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={prof}", "--hide-scrollbars", f"--window-size={width},{height}",
                        f"--screenshot={os.path.abspath(png)}", "file://" + os.path.abspath(html)],
                       check=True, capture_output=True, timeout=120)
    return png


def check_screenshot(png: str) -> dict:
    """What a person would check first: the page is not blank, it has text all the way down, and its first screen
    (the top 1000 pixels: the lessons at a glance) shows coloured plots (a broken image or an unstyled error page
    has none). Returns the measurements and `ok`."""
    img = plt.imread(png)[..., :3]
    ink = (img.min(axis=2) < 0.85)                                  # any non-white pixel
    colour = (img.max(axis=2) - img.min(axis=2)) > 0.25            # saturated: plot lines, bars, heat-maps
    rows = ink.any(axis=1)
    last = int(np.nonzero(rows)[0].max()) if rows.any() else 0
    out = {"height": int(img.shape[0]), "width": int(img.shape[1]), "ink_share": float(ink.mean()),
           "colour_share": float(colour.mean()), "first_screen_colour": float(colour[:1000].mean()),
           "last_ink_row": last}
    out["ok"] = out["ink_share"] > 0.01 and out["first_screen_colour"] > 2e-4 and last > 0.3 * img.shape[0]
    return out
