"""The lab: one command walks the lecture's path and writes a report.

Every registered experiment (`reasonlab.experiments`) runs once per seed; its result goes to the store as
<out>/<experiment>/seed<s>.json next to its plots. A finished (experiment, seed) whose key is unchanged is read
back instead of rerun, so an interrupted lab resumes where it stopped. The report (report.md, report.html,
findings.json) is rebuilt from the store at the end.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, replace
from typing import Callable

from .. import experiments as X
from ..core.config import make
from ..experiments import thresholds
from ..io import report, tblog
from ..io.checkpoint import cache_key, write_json
from ..io.files import cache_dir
from ..io.runs import locked
from ..stats import findings
from ..train.sft import base_cfg, base_name
from ..train.zoo import model_in_cache
from .config import LabConfig
from .executor import Unit, UnitsFailed, run_units
from .store import Store
from .store import unit_key as store_key


def unit_key(exp: str, seed: int, cfg: LabConfig) -> str:
    """What decides whether a finished result can be reused: the experiment and its config, the seed, the base
    model's recipe, what else the experiment depends on, the package and cache versions."""
    e, conf = X.get(exp), cfg.config_of(exp)
    return store_key(exp=exp, seed=seed, config=asdict(conf), base=cache_key(base_cfg(seed, cfg.quick)),
                     **(e.depends(conf) if e.depends else {}))


def lab_base(env: X.Env, seed: int) -> dict:
    """A unit that puts the seed's base model into the cache (trained under a lock, or found there)."""
    env.base(seed)
    return {"seed": seed}


def lab_unit(exp: str, seed: int, config: dict, env: X.Env, plugins: tuple = ()) -> dict:
    """One (experiment, seed) unit, in whichever process runs it: the experiment looked up (its file loaded there
    too), its config rebuilt, its run."""
    if exp not in X.names():
        X.load_plugins(plugins)
    e = X.get(exp)
    return e.run(make(e.Config, config), seed, env)


def run(cfg: LabConfig, log: Callable = print) -> dict:
    """Run (or reuse) every selected experiment for every seed on cfg.execution, then write the report. Returns
    {experiment: {"results": [per seed], "seconds": [...]}}. The base models are units of their own, queued first
    (one per seed, in parallel where the executor is), each seed's experiments queued behind the models trained
    before its own. The run directory is locked: a second lab on it stops (or, with cfg.wait, waits)."""
    cfg.validate()
    if cfg.retrain:
        os.environ["REASONLAB_RETRAIN"] = "1"        # the workers inherit it (train.zoo.shipped)
    with locked(cfg.out, "--out", cfg.wait, log):
        return _run(cfg, log)


def _run(cfg: LabConfig, log: Callable) -> dict:
    write_json(os.path.join(cfg.out, "config.json"), asdict(cfg))
    t_lab = time.perf_counter()
    timing: dict[str, float] = {}
    store = Store(cfg.out, packed=cfg.pack)
    env = replace(cfg.env(), cache=cache_dir(cfg.cache_dir))   # workers elsewhere (another cwd or node): an absolute path
    plugins = tuple(os.path.abspath(p) for p in cfg.experiment)
    logs = os.path.abspath(os.path.join(cfg.out, "logs"))
    only = cfg.selected()
    units, where = [], {}
    for i, exp in enumerate(only):
        e = X.get(exp)
        for seed in cfg.seeds:
            key = unit_key(exp, seed, cfg)
            if not cfg.fresh and store.reusable(exp, seed, key, e.check_result, log):
                log(f"[{i + 1}/{len(only)}] {exp}, seed {seed}: finished earlier, reused ({store.path(exp, seed)})")
                continue
            uid = f"{exp}/seed{seed}"
            units.append(Unit(uid, lab_unit, dict(exp=exp, seed=seed, config=asdict(cfg.config_of(exp)), env=env,
                                                  plugins=plugins),
                              log=os.path.join(logs, f"{exp}-seed{seed}.log")))
            where[uid] = (i, exp, seed, key)
    # Base models are units too, queued first. Each is trained once under its cache lock; units of a seed whose model
    # is still training queue behind the other seeds' units, so no worker waits on the lock while work is left.
    seeds = sorted(s for s in {u.kwargs["seed"] for u in units if X.get(u.kwargs["exp"]).uses_base}
                   if not model_in_cache(base_name(s, cfg.quick), base_cfg(s, cfg.quick), env.cache))
    wave = {s: i // max(1, cfg.execution.workers) for i, s in enumerate(seeds)}   # which round of training has it
    order = {name: i for i, name in enumerate(longest_first("run_cost"))}
    units.sort(key=lambda u: (wave.get(u.kwargs["seed"], 0), order[u.kwargs["exp"]]))
    bases = [Unit(f"base-model/seed{s}", lab_base, dict(env=env, seed=s), log=os.path.join(logs, f"base-model-seed{s}.log"))
             for s in seeds]

    def on_start(u: Unit, attempt: int) -> None:
        if u.uid in where:
            i, exp, seed, _ = where[u.uid]
            log(f"[{i + 1}/{len(only)}] {exp}, seed {seed} ..." + (f" (attempt {attempt})" if attempt > 1 else ""))

    def on_done(u: Unit, res: dict, secs: float) -> None:
        timing[u.uid] = round(secs, 1)
        if u.uid in where:                      # else a base model: in the cache now
            _, exp, seed, key = where[u.uid]
            store.write(exp, seed, key, secs, res)
            log(f"    {u.uid} done in {secs:.1f}s")
    outcomes = run_units(bases + units, cfg.execution, on_done=on_done, log=log, on_start=on_start)
    # a base model that failed resurfaces in its seed's units (each tries to train it again)
    failed = {uid: o.error for uid, o in outcomes.items() if not o.ok and uid in where}
    if bases:
        timing["base models"] = round(sum(timing.get(u.uid, 0.0) for u in bases), 1)
    if cfg.pack:
        store.pack(only, cfg.seeds)
    results = load_results(cfg.out, cfg.seeds)
    wall = time.perf_counter() - t_lab
    meta = {"seeds": list(cfg.seeds), "quick": cfg.quick, "wall_s": round(wall, 1), "ran": timing,
            "executor": asdict(cfg.execution), **({"failed": failed} if failed else {})}
    write_json(os.path.join(cfg.out, "timing.json"), meta)
    paths = write_report(cfg.out, results, meta, html=not cfg.pack)
    if cfg.report_to == "tensorboard":
        tblog.write_lab(cfg.out, results)
    log(f"lab finished in {wall:.0f}s; report: " + " and ".join(p for p in (paths["html"], paths["md"]) if p))
    if failed:
        raise UnitsFailed(f"{len(failed)} unit(s) failed after retries (see {logs}): "
                          + "; ".join(f"{u}: {e}" for u, e in failed.items()))
    return results


def rebuild_report(cfg: LabConfig) -> dict:
    """`--report-only`: the report from the results in the store (packed first, with cfg.pack). A bad record or
    timing file is a ValueError naming it."""
    with locked(cfg.out, "--out", cfg.wait):
        return _rebuild_report(cfg)


def _rebuild_report(cfg: LabConfig) -> dict:
    store = Store(cfg.out, packed=cfg.pack)
    if cfg.pack:
        store.pack(X.names(), cfg.seeds)
    results = load_results(cfg.out, cfg.seeds)
    if not results:
        raise ValueError(f"--report-only: no finished experiments in {cfg.out} for seeds {list(cfg.seeds)}")
    timing = os.path.join(cfg.out, "timing.json")
    try:
        with open(timing) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        meta = {"wall_s": 0.0}
    if not isinstance(meta, dict) or not isinstance(meta.get("wall_s", 0.0), (int, float)):
        raise ValueError(f"--report-only: {timing} is not the lab's timing record")
    return write_report(cfg.out, results, {**meta, "seeds": list(cfg.seeds), "quick": cfg.quick}, html=not cfg.pack)


def load_results(out: str, seeds) -> dict:
    """{experiment: {"results": [per-seed results], "seconds": [...]}} for every registered experiment with a result
    per seed in the store at `out` (a record of the wrong shape: BadRecord, naming the file)."""
    return Store(out).collect(X.names(), seeds, check=lambda name: X.get(name).check_result)


def longest_first(cost: str) -> list[str]:
    """The registered experiments by cost, longest first (ties: the report's order)."""
    return sorted(X.names(), key=lambda n: -getattr(X.get(n), cost))


def render(exp: str, results: list[dict], out: str) -> list[tuple[str, str]]:
    """One experiment's sections from its per-seed results (the lab's report, and each CLI command's)."""
    return X.get(exp).render(results, out)


def lab_findings(results: dict) -> list[dict]:
    """Every claim of every experiment in `results` ({experiment: {"results": [per seed]}}), in the report's order,
    each with its experiment's name. An experiment's first claim is its primary one, named in its code before any
    run; the primaries of the lab are corrected for multiplicity together (findings.holm)."""
    out = []
    for name in X.names():
        if name in results:
            fs = X.get(name).claims(results[name]["results"])
            out += [{**f, "experiment": name, "primary": i == 0} for i, f in enumerate(fs)]
    return findings.holm(out)


def glance(sections: dict, fs: list[dict]) -> str:
    """Lessons at a glance: one row per experiment, its question, its primary claim's verdict and a thumbnail of its
    first plot (read off the rendered sections, so nothing is typed twice)."""
    rows = ["| experiment | question | primary claim | verdict | plot |", "|---|---|---|---|---|"]
    for exp in X.names():
        for md, _ in sections.get(exp, [])[:1]:             # an experiment's main section comes first
            title = md.splitlines()[0].lstrip("# ").strip()
            q = re.search(r"> \*\*Question\.\*\*(.*?)(?:\n\n|\n[^>])", md, re.S)
            question = " ".join(re.sub(r"\n> ?", " ", q.group(1)).split()).replace("<", "&lt;") if q else ""
            img = re.search(r"!\[[^\]]*\]\(([^)]+\.png)\)", md)
            thumb = f'<img src="{img.group(1)}" width="180">' if img else ""
            prim = next((f for f in fs if f.get("experiment") == exp and f.get("primary")), None)
            verdict = f"**{prim['verdict']}**" if prim else "—"
            rows.append(f"| {title} | {question} | {prim['claim'] if prim else '—'} | {verdict} | {thumb} |")
    return "\n".join(rows)


_TO_RENDER: tuple = ()   # (results, out) for the forked rendering processes, which read it from the parent's memory


def _render_forked(exp: str) -> list[tuple[str, str]]:
    results, out = _TO_RENDER
    return render(exp, results[exp]["results"], out)


def render_all(results: dict, out: str, workers: int | None = None, also: Callable | None = None):
    """({experiment: its sections} for every experiment in results, also()): the sections rendered by `workers`
    forked processes (None: one per CPU, at most one per experiment; 1: here), longest first, while this process
    runs also(). The sections are independent, so two processes halve the rendering. Fork, not spawn: a spawned
    process imports torch and matplotlib again (~2 s). Forking a process whose torch has started OpenMP threads is
    safe only while the child runs no torch op (libgomp's pool does not survive fork: pytorch/pytorch#17199), and
    rendering runs none (tests/runner/test_lab.py checks it). Where fork is missing (Windows, macOS's default), or a
    rendering process dies, it renders here."""
    global _TO_RENDER
    exps = [e for e in longest_first("render_cost") if e in results]
    workers = min(len(exps), os.cpu_count() or 1) if workers is None else workers
    here = lambda: {e: render(e, results[e]["results"], out) for e in exps}   # noqa: E731
    if workers < 2 or len(exps) < 2 or sys.platform != "linux":
        return here(), also() if also else None
    _TO_RENDER, extra = (results, out), None
    try:
        with warnings.catch_warnings(), ProcessPoolExecutor(min(workers, len(exps)),
                                                            mp_context=mp.get_context("fork")) as pool:
            warnings.simplefilter("ignore", DeprecationWarning)   # Python >= 3.12 on forking a threaded process
            futs = {e: pool.submit(_render_forked, e) for e in exps}
            extra = also() if also else None
            done = {e: f.result() for e, f in futs.items()}
    except BrokenProcessPool:   # a rendering process died (killed, out of memory): render here instead
        done = here()
        if also and extra is None:
            extra = also()
    finally:
        _TO_RENDER = ()
    return done, extra


def numbered(secs: dict) -> dict:
    """The sections with their numbers: one count over the report, in the registry's order (a section's heading
    is "## <title>" as its experiment renders it; it reads "## <n>. <title>" in the report)."""
    n, out = 0, {}
    for exp in X.names():
        out[exp] = []
        for md, head in secs.get(exp, []):
            n += 1
            out[exp].append((md.replace("## ", f"## {n}. ", 1), head))
    return out


def write_report(out: str, results: dict, meta: dict, workers: int | None = None, html: bool = True) -> dict:
    """Build every section with results (render_all: `workers` processes), the headline table on top; write
    report.md and (html) report.html."""
    parts, heads = [], []
    secs, fs = render_all(results, out, workers, also=lambda: lab_findings(results))
    secs = numbered(secs)
    for exp in X.names():
        for md, head in secs.get(exp, []):
            parts.append(md)
            heads.append(f"| {md.splitlines()[0][3:]} | {head} | {sum(results[exp]['seconds']):.0f} s |")
    write_json(os.path.join(out, "findings.json"), fs)
    seeds = ", ".join(map(str, meta["seeds"]))
    quick = ("\n**Quick mode**: a small base model and tiny experiments that check the pipeline; the numbers are not "
             "results.\n" if meta["quick"] else "")
    top = f"""# reasonlab: the lab report

A 200K-parameter GPT learns "sum of k digits mod 10" (k = 2..8) and chooses how long to think: answer at once
(A), a short chain (S) or a full chain (T). Seeds {seeds}; mean ± std over seeds unless a line says otherwise;
chance is 0.1 for any single answer. Lab wall time {meta['wall_s']:.0f} s; the base models took
{meta.get('ran', {}).get('base models', 0.0):.0f} s of worker time to load or train (experiments reused from an
earlier run count their original time in the table).{quick}

## Lessons at a glance

{glance(secs, fs)}

Verdicts: {", ".join(f"{n} {v}" for v, n in findings.counts(fs).items())} (of {len(fs)} claims; primary claims
corrected together with Holm's method).

## Findings

Each claim is checked on this run's results: the statistic (one value per seed), its 95 % t interval over seeds,
the per-seed values, the threshold, and the verdict read off the interval; "untestable" says why the design cannot
test it. Each experiment's first claim is its primary one; the others are secondary.

{findings.table(fs)}

| experiment | headline | compute time |
|---|---|---|
{chr(10).join(heads)}

### Thresholds

Fixed before the run (`reasonlab/experiments/thresholds.py`), each with its source:

{thresholds.table()}
"""
    return report.write_report(out, top + "\n" + "\n".join(parts), "reasonlab lab report", html=html)
