"""Plots (matplotlib, Agg backend), report.md and the self-contained report.html."""
from __future__ import annotations

import base64
import functools
import os
import re
import shutil
import subprocess
import tempfile

import markdown
import numpy as np

from ..stats.findings import cell
from ..tasks import FMT_COLOR, FMT_LABEL, FMT_NAMES, FORMATS, FREE_COLOR
from ..tasks import get as get_task
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
    """A markdown table: the header, its rule and a line per row (cells are written as given, pipes escaped: format
    numbers first)."""
    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(cell, r)) + " |" for r in rows])


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


def k_label(task) -> str:
    """The x label of a plot over k: "k (digits)" on the digits task, "k (problem size)" on any other."""
    return "k (digits)" if task.name == "digits" else "k (problem size)"


@functools.lru_cache(maxsize=None)
def _chance(spec: str, k: int) -> float:
    return get_task(spec).chance(k)


def chance_at(task, k: int) -> float:
    """The best blind guess's accuracy at size k (`Task.chance`, which may count a draw of 20,000: kept per task and
    k, as a report reads it many times)."""
    return _chance(task.spec, int(k))


def chance_level(task, ks=None) -> float:
    """The best blind guess's accuracy (chance_at), mean over ks (default: the task's range): one chance line on a
    plot, one number in a text (digits: 0.1 at every k)."""
    cs = [chance_at(task, k) for k in (task.ks() if ks is None else ks)]
    return cs[0] if len(set(cs)) == 1 else float(np.mean(cs))


def plot_rl_runs(runs: dict[str, list[list[dict]]], path: str, title: str = "", chance: float = 0.1) -> str:
    """Reward, accuracy, length and KL over steps; one line per method (mean over seeds, band = min..max); the
    accuracy panel's chance line at `chance` (chance_level)."""
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
    axes[1].axhline(chance, color="grey", ls=":", lw=1, label=f"chance ({chance:.2g})")
    axes[1].legend(fontsize=8)
    if title:
        fig.suptitle(title, y=1.03)
    return save(fig, path)


def plot_format_share(hist: list[dict], path: str, title: str = "", xlabel: str = "k (digits)") -> str:
    """Format share over steps (stacked area) and format share by k at the last step (stacked bars; x label
    `xlabel`, k_label)."""
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
    b.set_xlabel(xlabel)
    b.set_ylim(0, 1)
    b.set_title(f"format by k, steps {tail[0]['step']}-{tail[-1]['step']}")
    if title:
        fig.suptitle(title, y=1.03)
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
