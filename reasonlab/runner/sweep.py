"""`reasonlab sweep`: a grid over RL settings, adaptive-thinking methods and seeds, run on an executor.

A grid maps keys to values; the cells are their product, and each cell runs once per seed. Keys are RLConfig
fields (steps, learning_rate, beta, ...), `algo` (an RL preset, default grpo) and `method` (an adaptive-thinking
reward from adaptive.METHODS; its cells start from the adaptive defaults: 200 steps, lr 1e-4, beta 0.04).
One (cell, seed) is a unit: `run_cell` trains from the base model of that seed and evaluates greedily; its
result goes to the result store (`runner.store`) as <out>/cells/<cell>/seed<s>.json with a key of everything it
depends on, so a rerun reuses finished units and runs only new or failed ones. `render` aggregates over seeds (mean ± std, and a 95 % bootstrap interval
over the evaluation problems of all seeds) into table.md, plots and report.html.

A grid from TOML:

    seeds = [0, 1, 2]
    base = "standard"          # standard | quick | tiny (the base model recipe)
    [grid]
    method = ["grpo", "cost0.3", "thinkless_fmt"]
    [set]                      # fields fixed in every cell
    steps = 100

or from the command line: `reasonlab sweep --grid learning_rate=1e-5,3e-5 --grid beta=0,0.04 --set steps=40`.
"""
from __future__ import annotations

import copy
import json
import os
import re
import time
from dataclasses import asdict, replace
from typing import Callable

import matplotlib.pyplot as plt
import numpy as np

from ..core.evaluate import evaluate
from ..core.problems import TEST_SEED, problems_per_k
from ..io import tblog
from ..io.checkpoint import cache_key, fingerprint, write_json, write_text
from ..io.report import plot_rl_runs, save, write_report
from ..io.runs import locked
from ..methods import adaptive
from ..stats.summary import bootstrap_ci, mean_std
from ..train.rl import RLConfig, train
from ..train.sft import Recipe, base_cfg, base_name
from ..train.zoo import cached_model
from .config import ADAPTIVE_DEFAULTS, SweepConfig
from .executor import Unit, run_units
from .store import Store
from .store import unit_key as store_key

HIST_KEYS = ("step", "reward", "reward_std", "acc", "length", "kl", "kl_exact", "entropy", "frac_reward_zero_std",
             "share", "step_time")


# ---------------------------------------------------------------------------------------------------------------
# Grids from the command line and TOML, typed by RLConfig's fields.


# ---------------------------------------------------------------------------------------------------------------
# One unit: a cell and a seed.

def tiny_base_cfg(seed: int) -> dict:
    """A base model trained for a few seconds: for tests and overhead measurements, not for results."""
    r = Recipe.from_dict(base_cfg(seed))
    r = replace(r, phases=[replace(ph, steps=5, warmup=1) for ph in r.phases])
    return dict(r.to_dict(), batch=32)


def base_model(base: str, seed: int) -> tuple[str, dict]:
    """(cache name, recipe) of the base model for `seed`."""
    if base == "tiny":
        return f"sweep-tiny-seed{seed}", tiny_base_cfg(seed)
    return base_name(seed, base == "quick"), base_cfg(seed, base == "quick")


def run_cell(params: dict, seed: int, base: str = "standard", cache: str | None = None, device: str = "cpu",
             eval_n: int = 200) -> dict:
    """Train from the seed's base model with the cell's settings, evaluate greedily; a JSON-able result."""
    name, bcfg = base_model(base, seed)
    model = cached_model(name, bcfg, cache=cache, device=device, progress=False)
    p = dict(params)
    method, algo = p.pop("method", None), p.pop("algo", "grpo")
    reward_fn = group_fn = None
    if method is not None:
        ref_acc = adaptive.reference_accuracy(model) if method == "adaptthink" else None
        reward_fn, group_fn, extra = adaptive.method_parts(method, ref_acc)
        p = {**ADAPTIVE_DEFAULTS, **extra, **p}
    cfg = RLConfig.preset(algo, **p, seed=seed, log_every=0)
    print(f"cell {json.dumps(params, sort_keys=True)} seed {seed}: {json.dumps(asdict(cfg))}", flush=True)
    policy = copy.deepcopy(model)
    t = time.perf_counter()
    hist = train(policy, copy.deepcopy(model), cfg, reward_fn=reward_fn, group_fn=group_fn, log=print, progress=False)
    train_s = time.perf_counter() - t
    probs = problems_per_k(eval_n, seed=TEST_SEED)
    r = evaluate(policy, probs)
    return {"params": params, "seed": seed, "algo": algo, "method": method, "acc": r["acc"], "tokens": r["length"],
            "share": r["share"], "acc_by_k": {k: v["acc"] for k, v in r["per_k"].items()},
            "correct": "".join("1" if x["answer"] == sum(d) % 10 else "0" for x, d in zip(r["results"], probs)),
            "train_s": round(train_s, 2), "hist": [{k: h[k] for k in HIST_KEYS if k in h} for h in hist]}


def cell_id(params: dict, keys: list[str]) -> str:
    """A readable, unique directory name for a cell: its grid values, then a short hash of all its params."""
    slug = "_".join(f"{k}={params[k]}" for k in keys) or "cell"
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "-", slug)[:80]
    return f"{slug}-{fingerprint(params)[:6]}"


def unit_key(params: dict, seed: int, cfg: SweepConfig) -> str:
    return store_key(params=params, seed=seed, eval_n=cfg.eval_n, base=cache_key(base_model(cfg.base, seed)[1]))


def check_cell(result) -> None:
    """A (cell, seed) result read back has the shape run_cell gives it."""
    if not isinstance(result, dict):
        raise ValueError(f"a sweep result must be a JSON object, got {type(result).__name__}")
    for k, t in (("acc", float), ("tokens", float), ("correct", str), ("hist", list), ("share", dict),
                 ("params", dict), ("train_s", float)):
        if not isinstance(result.get(k), (t, int) if t is float else t) or isinstance(result.get(k), bool):
            raise ValueError(f"a sweep result needs {k} ({t.__name__})")


def run(cfg: SweepConfig, log: Callable | None = print) -> dict:
    """Run (or reuse) every (cell, seed) on the executor, then aggregate and render. Returns the summary. The run
    directory is locked: a second sweep on it stops (or, with cfg.wait, waits)."""
    cfg.validate()
    with locked(cfg.out, "--out", cfg.wait, log):
        return _run(cfg, log)


def _run(cfg: SweepConfig, log: Callable | None) -> dict:
    out = os.path.abspath(cfg.out)           # workers may run elsewhere (another cwd, another node)
    cache = os.path.abspath(os.path.expanduser(cfg.cache_dir)) if cfg.cache_dir else None
    write_json(os.path.join(out, "config.json"), asdict(cfg))
    cells = cfg.cells()
    ids = [cell_id(c, list(cfg.grid)) for c in cells]
    store = Store(out)
    units, where = [], {}
    for cid, params in zip(ids, cells):
        for seed in cfg.seeds:
            uid = f"{cid}/seed{seed}"
            key = unit_key(params, seed, cfg)
            where[uid] = (f"cells/{cid}", seed, key)
            if not cfg.fresh and store.reusable(f"cells/{cid}", seed, key, check_cell, log):
                continue
            units.append(Unit(uid, run_cell, dict(params=params, seed=seed, base=cfg.base, cache=cache,
                                                  device=cfg.device, eval_n=cfg.eval_n),
                              log=os.path.join(out, "logs", f"{cid}-seed{seed}.log")))
    if log:
        log(f"sweep: {len(cells)} cell(s) x {len(cfg.seeds)} seed(s) = {len(where)} units, {len(where) - len(units)} "
            f"finished earlier, {len(units)} to run on {cfg.execution.executor} x {cfg.execution.workers}")
    t0 = time.perf_counter()

    def on_done(u: Unit, result: dict, secs: float) -> None:
        group, seed, key = where[u.uid]
        store.write(group, seed, key, secs, result)
        if cfg.report_to == "tensorboard":
            tblog.write_run(os.path.join(out, "tensorboard", u.uid), result["hist"],
                            hparams=result["params"])
    outcomes = run_units(units, cfg.execution, on_done=on_done, log=log)
    failed = {uid: o.error for uid, o in outcomes.items() if not o.ok}
    results = {}
    for cid, params in zip(ids, cells):
        rs = store.finished(f"cells/{cid}", cfg.seeds, lambda s, p=params: unit_key(p, s, cfg), check_cell)
        results[cid] = {"params": params, "runs": [r["result"] for r in rs], "seconds": [r["seconds"] for r in rs]}
    summary = aggregate(results, cfg)
    summary.update(failed=failed, wall_s=round(time.perf_counter() - t0, 1), ran=len(units),
                   executor=asdict(cfg.execution))
    write_json(os.path.join(out, "summary.json"), summary)
    render(summary, out)
    if log:
        log(f"sweep finished in {summary['wall_s']:.0f}s ({len(failed)} unit(s) failed); "
            f"report: {os.path.join(out, 'report.html')}")
    return summary


# ---------------------------------------------------------------------------------------------------------------
# Aggregation and the report.

def aggregate(results: dict, cfg: SweepConfig) -> dict:
    """Per cell: accuracy mean ± std over seeds and a 95 % bootstrap interval over all seeds' evaluation problems;
    tokens, direct share and training seconds mean ± std."""
    rows = []
    for cid, r in results.items():
        runs = r["runs"]
        row = {"cell": cid, "params": r["params"], "seeds_done": [x["seed"] for x in runs], "n": len(runs)}
        if runs:
            correct = np.array([c == "1" for x in runs for c in x["correct"]], dtype=float)
            row.update(acc=mean_std([x["acc"] for x in runs]), acc_ci=bootstrap_ci(correct),
                       tokens=mean_std([x["tokens"] for x in runs]),
                       direct=mean_std([x["share"]["direct"] for x in runs]),
                       train_s=mean_std([x["train_s"] for x in runs]))
        rows.append(row)
    return {"cells": rows, "seeds": list(cfg.seeds), "grid": cfg.grid, "fixed": cfg.fixed, "base": cfg.base,
            "eval_n": cfg.eval_n, "hists": {cid: [x["hist"] for x in r["runs"]] for cid, r in results.items()}}


def _label(params: dict, keys: list[str]) -> str:
    return ", ".join(f"{k}={params[k]}" for k in keys) or "default"


def plot_cells(summary: dict, path: str) -> str:
    """Accuracy per cell (mean, 95 % bootstrap interval) and accuracy against tokens."""

    rows = [r for r in summary["cells"] if r["n"]]
    keys = list(summary["grid"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, max(3.2, 0.35 * len(rows) + 1.5)))
    y = np.arange(len(rows))
    m = np.array([r["acc"][0] for r in rows])
    lo = np.array([r["acc_ci"][0] for r in rows])
    hi = np.array([r["acc_ci"][1] for r in rows])
    a.barh(y, m, xerr=[m - lo, hi - m], color="#4C72B0", alpha=0.8, capsize=3)
    a.set_yticks(y, [_label(r["params"], keys) for r in rows], fontsize=8)
    a.invert_yaxis()
    a.axvline(0.1, color="grey", ls=":", lw=1, label="chance (0.1)")
    a.set_xlim(0, 1.02)
    a.set_xlabel("greedy accuracy (bar: mean over seeds; whisker: 95 % bootstrap CI)")
    a.legend(fontsize=8)
    for r in rows:
        b.errorbar(r["tokens"][0], r["acc"][0], xerr=r["tokens"][1], yerr=r["acc"][1], fmt="o", capsize=2,
                   label=_label(r["params"], keys))
    b.set_xlabel("mean generated tokens")
    b.set_ylabel("greedy accuracy")
    b.set_title("accuracy against tokens (± std over seeds)")
    if len(rows) <= 12:
        b.legend(fontsize=7)
    return save(fig, path)


def table(summary: dict) -> str:
    keys = list(summary["grid"])
    head = keys + ["accuracy (mean ± std)", "95 % CI", "tokens", "direct share", "train s", "seeds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in summary["cells"]:
        vals = [str(r["params"][k]) for k in keys]
        if r["n"]:
            vals += [f"{r['acc'][0]:.3f} ± {r['acc'][1]:.3f}", f"[{r['acc_ci'][0]:.3f}, {r['acc_ci'][1]:.3f}]",
                     f"{r['tokens'][0]:.2f} ± {r['tokens'][1]:.2f}", f"{r['direct'][0]:.2f}",
                     f"{r['train_s'][0]:.1f}", f"{r['n']}/{len(summary['seeds'])}"]
        else:
            vals += ["failed", "", "", "", "", f"0/{len(summary['seeds'])}"]
        lines.append("| " + " | ".join(vals) + " |")
    return "\n".join(lines)


def render(summary: dict, out: str) -> str:
    """table.md, cells.png, curves.png and report.md/report.html; returns the markdown section."""
    md_table = table(summary)
    write_text(os.path.join(out, "table.md"), md_table + "\n")
    keys = list(summary["grid"])
    done = [r for r in summary["cells"] if r["n"]]
    pics = ""
    if done:
        plot_cells(summary, os.path.join(out, "cells.png"))
        pics = "![accuracy per cell](cells.png)\n"
        if len(done) <= 10:
            plot_rl_runs({_label(r["params"], keys): summary["hists"][r["cell"]] for r in done},
                         os.path.join(out, "curves.png"), "training curves (mean over seeds; band = min..max)")
            pics += "\n![training curves](curves.png)\n"
        best = max(done, key=lambda r: (r["acc"][0], -r["tokens"][0]))
        head = (f"Best cell: **{_label(best['params'], keys)}**, accuracy {best['acc'][0]:.3f} ± {best['acc'][1]:.3f} "
                f"(95 % CI [{best['acc_ci'][0]:.3f}, {best['acc_ci'][1]:.3f}]) at {best['tokens'][0]:.2f} tokens.")
    else:
        head = "No cell finished."
    failed = summary.get("failed") or {}
    fail_md = ("\n**Failed units** (after their retries; rerun the sweep to retry them):\n\n"
               + "\n".join(f"- `{u}`: {e}" for u, e in failed.items()) + "\n") if failed else ""
    md = f"""## Sweep: {' × '.join(f'{k} ({len(v)})' for k, v in summary['grid'].items()) or 'one cell'} × {len(summary['seeds'])} seeds

{head}

{pics}
{md_table}

Each cell trains from the {summary['base']} base model of each seed (seeds {', '.join(map(str, summary['seeds']))})
with the fixed settings `{json.dumps(summary['fixed'], sort_keys=True)}` and is evaluated greedily on
{summary['eval_n']} problems per k. Accuracy: mean ± std over seeds (ddof 1), and a 95 % percentile bootstrap
interval over the evaluation problems of all seeds pooled (it ignores the spread between seeds).
{fail_md}"""
    write_report(out, "# reasonlab sweep\n\n" + md, "reasonlab sweep")
    return md
