"""`reasonlab sweep NAME`: a grid over any experiment's config, each cell run once per seed, its claims checked.

A grid maps fields of the experiment's Config to values; the cells are their product, over the experiment's
default (or, with --quick, quick) config. A (cell, seed) is a unit of the lab's engine (`runner.units`): it runs
the experiment's own `run` on the same executor (this process, a pool, or Ray), and its result goes to the result
store as <out>/cells/<cell>/seed<s>.json under the same key the lab would give it, so a rerun reuses finished
units and runs only new or failed ones. For each cell the experiment's own `claims` are checked over its seeds and
its own `render` draws its page (cells/<cell>/report.md); the sweep writes one table of cells x claims with their
verdicts (table.md, report.html) and every cell's findings (findings.json).

    reasonlab sweep kl --grid probe_beta=0.01,0.04,0.2 --seeds 0 1 2
    reasonlab sweep rl --grid learning_rate=1e-5,3e-5 --set algos=grpo+dr_grpo --config grid.toml
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import asdict
from typing import Callable

from .. import experiments as X
from ..io import report, tblog
from ..io.checkpoint import fingerprint, write_json, write_text
from ..io.files import cache_dir
from ..io.runs import locked
from ..stats import findings
from . import lab, units
from .config import SweepConfig
from .store import Store


def cell_id(params: dict, keys: list[str]) -> str:
    """A readable, unique directory name for a cell: its grid values, then a short hash of all its values."""
    slug = "_".join(f"{k}={'+'.join(map(str, params[k])) if isinstance(params[k], tuple) else params[k]}"
                    for k in keys) or "cell"
    slug = re.sub(r"[^A-Za-z0-9_.=+-]+", "-", slug)[:80]
    return f"{slug}-{fingerprint(params)[:6]}"


def run(cfg: SweepConfig, log: Callable | None = print, report_only: bool = False) -> dict:
    """Run (or reuse) every (cell, seed) on the executor, check each cell's claims and write the table (report_only:
    from the store alone, nothing run). Returns the summary. The run directory is locked: a second sweep on it
    stops (or, with cfg.wait, waits)."""
    log = log or (lambda *a: None)
    cfg.validate()
    with locked(cfg.run_dir, "--out", cfg.wait, log):
        return _run(cfg, log, report_only)


def _run(cfg: SweepConfig, log: Callable, report_only: bool) -> dict:
    out = os.path.abspath(cfg.run_dir)           # workers may run elsewhere (another cwd, another node)
    write_json(os.path.join(out, "config.json"), asdict(cfg))
    cells = cfg.cells()
    ids = [cell_id(c, list(cfg.grid)) for c in cells]
    arms = [units.Arm(f"cells/{cid}", cfg.exp, cfg.config_of(c)) for cid, c in zip(ids, cells)]
    env = X.Env(cache=cache_dir(cfg.cache_dir), device=cfg.device, quick=cfg.quick,
                checkpoint=cfg.checkpoint and os.path.abspath(cfg.checkpoint))
    store = Store(out)
    log(f"sweep {cfg.exp}: {len(cells)} cell(s) x {len(cfg.seeds)} seed(s) on {cfg.execution.executor} x "
        f"{cfg.execution.workers}")
    t0 = time.perf_counter()
    timing, failed = {}, {}
    if not report_only:
        timing, failed = units.execute(arms, cfg.seeds, env, cfg.execution, store, os.path.join(out, "logs"),
                                       cfg.fresh, tuple(os.path.abspath(p) for p in cfg.experiment), log,
                                       tuple(os.path.abspath(p) for p in cfg.task_file))
    rows = [judge(cfg, arm, cid, params, store, out) for arm, cid, params in zip(arms, ids, cells)]
    summary = {"name": cfg.exp, "grid": cfg.grid, "fixed": cfg.fixed, "seeds": list(cfg.seeds), "cells": rows,
               "failed": failed, "ran": len([u for u in timing if u.startswith("cells/")]),
               "wall_s": round(time.perf_counter() - t0, 1)}
    write_json(os.path.join(out, "summary.json"), summary)
    write_json(os.path.join(out, "findings.json"), [{**f, "cell": r["cell"], "params": r["params"]}
                                                    for r in rows for f in r["findings"]])
    render(summary, out)
    log(f"sweep finished in {summary['wall_s']:.0f}s ({len(failed)} unit(s) failed); "
        f"table: {os.path.join(out, 'table.md')}")
    return summary


def judge(cfg: SweepConfig, arm: units.Arm, cid: str, params: dict, store: Store, out: str) -> dict:
    """One cell: its finished seeds, its claims over them, its page (the experiment's render), its event files."""
    exp = X.get(cfg.exp)
    recs = store.finished(arm.group, cfg.seeds, lambda s: units.unit_key(cfg.exp, s, arm.config, cfg.quick,
                                                                        cfg.checkpoint), exp.check_result)
    rs = [r["result"] for r in recs]
    row = {"cell": cid, "params": {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()},
           "n": len(rs), "findings": [], "seconds": [r["seconds"] for r in recs]}
    if rs:
        d = os.path.join(out, arm.group)
        row["findings"] = lab.experiment_findings(cfg.exp, rs, arm.config)
        with findings.judged(row["findings"]):            # the page says the verdicts of the sweep's table
            secs = exp.render(rs, d)
        report.write_report(d, "\n".join(md for md, _ in secs), f"{cfg.exp}, {cid}", html=False)
        row["headline"] = "; ".join(h for _, h in secs if h)
        if cfg.report_to == "tensorboard":
            tblog.write_lab(d, {cfg.exp: {"results": rs}})
    return row


def _short(f: dict) -> str:
    ci = f["ci95"]
    if f["value"] is None:
        return f["verdict"]
    lo, hi = ("—" if v is None else f"{v:.3f}" for v in ci)
    return f"{f['verdict']}: {f['value']:.3f} [{lo}, {hi}]"


def table(summary: dict) -> str:
    """Cells x claims: each cell's grid values and, per claim, its verdict with the statistic and its interval; the
    claims below, numbered as in the columns (a claim's text may name the cell's own values)."""
    keys = list(summary["grid"])
    n = max((len(r["findings"]) for r in summary["cells"]), default=0)
    head = keys + ["seeds"] + [f"C{i + 1}" for i in range(n)]
    rows = []
    for r in summary["cells"]:
        vals = [str(r["params"][k]) for k in keys] + [f"{r['n']}/{len(summary['seeds'])}"]
        vals += [_short(f) for f in r["findings"]] + ["failed" if not r["n"] else ""] * (n - len(r["findings"]))
        rows.append(vals)
    first = next((r["findings"] for r in summary["cells"] if r["findings"]), [])
    legend = "\n".join(f"- C{i + 1}: {f['claim']} ({f['statistic']}; threshold {f['threshold']})"
                       for i, f in enumerate(first))
    return report.md_table(head, rows) + ("\n\n" + legend if legend else "")


def render(summary: dict, out: str) -> str:
    """table.md, and report.md / report.html: the table, each cell's findings, the failed units."""
    md_table = table(summary)
    write_text(os.path.join(out, "table.md"), md_table + "\n")
    failed = summary.get("failed") or {}
    parts = [f"# reasonlab sweep: {summary['name']}\n",
             f"Grid {', '.join(f'{k} = {v}' for k, v in summary['grid'].items()) or '(none)'}; fixed "
             f"{summary['fixed'] or '(nothing)'}; seeds {', '.join(map(str, summary['seeds']))}. Each cell is the "
             f"experiment's own run, claims and page ([cells/](cells/)); verdicts as the lab reads them (95 % t "
             f"intervals over the cell's seeds; no correction across cells).\n", md_table]
    for r in summary["cells"]:
        if r["findings"]:
            parts.append(f"\n## {r['cell']}\n\n[its page](cells/{r['cell']}/report.md)\n\n{findings.table(r['findings'])}")
    if failed:
        parts.append("\n**Failed units** (after their retries; rerun the sweep to retry them):\n\n"
                     + "\n".join(f"- `{u}`: {e}" for u, e in failed.items()))
    md = "\n".join(parts) + "\n"
    report.write_report(out, md, f"reasonlab sweep {summary['name']}")
    return md
