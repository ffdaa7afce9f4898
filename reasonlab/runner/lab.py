"""The lab: one command walks the lecture's path and writes a report.

Every registered experiment (`reasonlab.experiments`) runs once per seed on each task of the run; its result goes to
the store as <out>/<experiment>/seed<s>.json next to its plots (digits), <out>/<task>/<experiment>/seed<s>.json (any
other task: a "group" of the store, runner.config.group_of). A finished (group, seed) whose key is unchanged is read
back instead of rerun, so an interrupted lab resumes where it stopped. The report (report.md, report.html,
findings.json) is rebuilt from the store at the end, one report for every task, with a task column.
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
from .. import tasks as T
from ..experiments import thresholds
from ..io import report, tblog
from ..io.checkpoint import write_json
from ..io.files import cache_dir
from ..io.runs import locked
from ..stats import findings, power
from . import pilot, units
from .config import LabConfig, group_of, split_group
from .executor import UnitsFailed
from .store import Store


def unit_key(group: str, seed: int, cfg: LabConfig) -> str:
    """The store key of one (group: an experiment on a task, seed) of this lab (units.unit_key)."""
    return units.unit_key(split_group(group)[0], seed, cfg.config_of(group), cfg.quick, cfg.checkpoint)


def run(cfg: LabConfig, log: Callable = print) -> dict:
    """Run (or reuse) every selected experiment for every seed on cfg.execution, then write the report. Returns
    {experiment: {"results": [per seed], "seconds": [...]}}. The run directory is locked: a second lab on it stops
    (or, with cfg.wait, waits)."""
    cfg = planned(cfg, log)
    before = os.environ.get("REASONLAB_RETRAIN")
    if cfg.retrain:
        os.environ["REASONLAB_RETRAIN"] = "1"        # the workers inherit it (train.zoo.shipped)
    try:
        with locked(cfg.out, "--out", cfg.wait, log):
            return _run(cfg, log)
    finally:                                        # this process's later work copies shipped models again
        if before is None:
            os.environ.pop("REASONLAB_RETRAIN", None)
        else:
            os.environ["REASONLAB_RETRAIN"] = before


def _run(cfg: LabConfig, log: Callable) -> dict:
    write_json(os.path.join(cfg.out, "config.json"), asdict(cfg))
    t_lab = time.perf_counter()
    store = Store(cfg.out, packed=cfg.pack)
    env = replace(cfg.env(), cache=cache_dir(cfg.cache_dir),      # workers elsewhere (another cwd or node): absolute
                  checkpoint=cfg.checkpoint and os.path.abspath(cfg.checkpoint))
    runs = cfg.runs()
    arms = [units.Arm(group, split_group(group)[0], config, cfg.seeds_of(group)) for group, config in runs]
    timing, failed = units.execute(arms, cfg.seeds, env, cfg.execution, store, os.path.abspath(os.path.join(cfg.out, "logs")),
                                   cfg.fresh, tuple(os.path.abspath(p) for p in cfg.experiment), log,
                                   tuple(os.path.abspath(p) for p in cfg.task_file))
    if cfg.pack:
        store.pack([g for g, _ in runs], cfg.seeds_of)
    results = load_results(cfg.out, cfg.seeds_of)
    wall = time.perf_counter() - t_lab
    meta = {"seeds": list(cfg.seeds), "seeds_per": cfg.seeds_per, "quick": cfg.quick, "wall_s": round(wall, 1),
            "ran": timing, "executor": asdict(cfg.execution), **({"failed": failed} if failed else {})}
    write_json(os.path.join(cfg.out, "timing.json"), meta)
    paths = write_report(cfg.out, results, meta, html=not cfg.pack, config_of=cfg.config_of)
    if cfg.report_to == "tensorboard":
        tblog.write_lab(cfg.out, results)
    log(f"lab finished in {wall:.0f}s; report: " + " and ".join(p for p in (paths["html"], paths["md"]) if p))
    if failed:
        raise UnitsFailed(f"{len(failed)} unit(s) failed after retries (see {os.path.join(cfg.out, 'logs')}): "
                          + "; ".join(f"{u}: {e}" for u, e in failed.items()))
    return results


def rebuild_report(cfg: LabConfig) -> dict:
    """`--report-only`: the report from the results in the store (packed first, with cfg.pack), each experiment at
    the seeds the run gave it (its config.json's seeds_per, unless cfg names or plans others). A bad record, timing
    or config file is a ValueError naming it."""
    cfg = planned(replace(cfg, seeds_per={**ran_seeds(cfg.out), **cfg.seeds_per}))
    with locked(cfg.out, "--out", cfg.wait):
        return _rebuild_report(cfg)


def ran_seeds(out: str) -> dict[str, int]:
    """experiment -> its seed count where the lab at `out` ran more than its seeds (config.json's seeds_per; {}
    where there is no config.json)."""
    path = os.path.join(out, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            ran = json.load(f)
    except OSError:
        return {}
    except ValueError:
        ran = None
    if not isinstance(ran, dict) or not isinstance(ran.get("seeds_per", {}), dict):
        raise ValueError(f"--report-only: {path} is not the lab's config record")
    return ran.get("seeds_per", {})


def _rebuild_report(cfg: LabConfig) -> dict:
    store = Store(cfg.out, packed=cfg.pack)
    if cfg.pack:
        store.pack(lab_groups(cfg.out), cfg.seeds_of)
    results = load_results(cfg.out, cfg.seeds_of)
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
    return write_report(cfg.out, results, {**meta, "seeds": list(cfg.seeds), "seeds_per": cfg.seeds_per,
                                           "quick": cfg.quick}, html=not cfg.pack, config_of=cfg.config_of)


def planned(cfg: LabConfig, log: Callable = print) -> LabConfig:
    """cfg validated, with each experiment's seeds planned from its power where cfg.power_seeds (pilot.power_seeds)."""
    cfg.validate()
    if not cfg.power_seeds:
        return cfg
    plan = pilot.power_seeds(cfg)
    log(f"seeds by power (pilot: {cfg.out if cfg.placebo else os.path.join(cfg.out, 'placebo')}): " + (", ".join(
        f"{e} {n}" for e, n in plan.items()) or f"every experiment at {len(cfg.seeds)} (none needs more within "
        f"{cfg.most_seeds}, or no pilot)"))
    return replace(cfg, seeds_per={**cfg.seeds_per, **plan})


def lab_groups(out: str) -> list[str]:
    """The store groups a lab at `out` may hold, in the report's order: every registered experiment on digits
    (<exp>/), then on each other task whose folder is there (<task>/<exp>/), tasks in the registry's order."""
    found = []
    if os.path.isdir(out):
        for d in sorted(os.listdir(out)):
            if d in X.names() or not os.path.isdir(os.path.join(out, d)):
                continue
            try:
                found.append(T.get(d.replace(",", ":")).spec)
            except ValueError:
                continue
    rank = {n: i for i, n in enumerate(T.names())}
    found.sort(key=lambda spec: (rank.get(spec.split(":")[0], len(rank)), spec))
    return [group_of(e, t) for t in ["digits", *found] for e in X.names()]


def load_results(out: str, seeds) -> dict:
    """{group: {"results": [per-seed results], "seconds": [...]}} for every experiment on every task with a result
    per seed in the store at `out` (a group: the experiment's name for digits, <task>/<experiment> for another task;
    seeds: a tuple, or a function of the group (LabConfig.seeds_of); a record of the wrong shape: BadRecord, naming
    the file)."""
    return Store(out).collect(lab_groups(out), seeds, check=lambda g: X.get(split_group(g)[0]).check_result)


def render(group: str, results: list[dict], out: str, judged: list[dict] = ()) -> list[tuple[str, str]]:
    """One experiment's sections on one task from its per-seed results: its plots under <out>/<task>/ for a task
    other than digits, the links to them and the section titles rewritten to say so. `judged`: the lab's findings,
    whose verdicts the sections say (findings.judged), never judging again."""
    exp, task = split_group(group)
    with findings.judged([f for f in judged if f.get("experiment") == exp and f.get("task", "digits") == task]):
        if task == "digits":
            return X.get(exp).render(results, out)
        folder = group.rsplit("/", 1)[0]
        secs = X.get(exp).render(results, os.path.join(out, folder))
    return [(re.sub(r"\]\((?!https?:|/)([^)]+)\)", lambda m: f"]({folder}/{m.group(1)})", md, count=0)
             .replace("\n", f" (task {task})\n", 1), head) for md, head in secs]


def experiment_claims(name: str, rs: list[dict], config=None) -> list[dict]:
    """One experiment's claims over its per-seed results, each with its experiment's name, its task and its kind,
    not yet judged. An experiment whose claims declare no kind has its first claim as its primary."""
    fs = X.get(name).claims(rs)
    if not any("kind" in f for f in fs):
        fs = [{**f, "kind": findings.PRIMARY if i == 0 else findings.SECONDARY} for i, f in enumerate(fs)]
    return [{**f, "experiment": name, "task": getattr(config, "task", "digits"), "kind": findings.kind_of(f),
             "primary": findings.kind_of(f) == findings.PRIMARY} for f in fs]


def room_of(name: str, config) -> tuple[float, float] | None:
    """The range the experiment's design lets its primary's statistic reach, from its config (None: not given)."""
    e = X.get(name)
    return e.room(config) if e.room is not None and config is not None else None


def experiment_findings(name: str, rs: list[dict], config=None) -> list[dict]:
    """One experiment's claims (experiment_claims), judged: findings.judge, the primary against the design's room
    from `config` (room_of), every claim gated by its premises."""
    return findings.judge(experiment_claims(name, rs, config), room_of(name, config))


def lab_findings(results: dict, config_of: Callable | None = None, placebo: dict | None = None) -> list[dict]:
    """Every claim of every experiment on every task in `results` ({group: {"results": [per seed]}}), in the report's
    order (experiment_findings; config_of(group): its config, for the primary's room and its task); each primary
    against its placebo's spread too (findings.floored; placebo: {group: its placebo's primary}); the primaries of
    the lab, every task's, are corrected for multiplicity together (findings.holm), the family being every
    (experiment with a primary, task) the run holds: fixed by the lab's config before the run."""
    out = []
    for group in results:
        exp, task = split_group(group)
        config = config_of(group) if config_of else None
        fs = experiment_findings(exp, results[group]["results"], config)
        spread = (placebo or {}).get(group, {}).get("per_seed")
        out += [{**(findings.floored(f, spread) if f["primary"] else f), "task": task} for f in fs]
    return findings.holm(out, family=pilot.family(results))


def _primary(fs: list[dict], group: str) -> dict | None:
    exp, task = split_group(group)
    return next((f for f in fs if f.get("experiment") == exp and f.get("task", "digits") == task and f.get("primary")),
                None)


def glance(sections: dict, fs: list[dict]) -> str:
    """Lessons at a glance: one row per experiment and task, its question (as the experiment declares it), its
    primary claim's verdict and a thumbnail of its first plot (read off the rendered section)."""
    rows = ["| experiment | task | question | primary claim | verdict | plot |", "|---|---|---|---|---|---|"]
    for group, secs in sections.items():
        for md, _ in secs[:1]:             # an experiment's main section comes first
            title = md.splitlines()[0].lstrip("# ").strip()
            exp = split_group(group)[0]
            question = (X.BUILTIN.get(exp) or X.get(exp).question.split("?")[0] + "?").replace("<", "&lt;")
            img = re.search(r"!\[[^\]]*\]\(([^)]+\.png)\)", md)
            thumb = f'<img src="{img.group(1)}" width="180">' if img else ""
            prim = _primary(fs, group)
            verdict = findings.verdict_cell(prim) if prim else "—"
            claim = findings.cell(prim["claim"]) if prim else "—"
            rows.append(f"| {title} | {split_group(group)[1]} | {findings.cell(question)} | {claim} | "
                        f"{verdict} | {thumb} |")
    return "\n".join(rows)


_TO_RENDER: tuple = ()   # (results, out) for the forked rendering processes, which read it from the parent's memory


def _render_forked(group: str) -> list[tuple[str, str]]:
    results, out, judged = _TO_RENDER
    return render(group, results[group]["results"], out, judged)


def render_all(results: dict, out: str, workers: int | None = None, judged: list[dict] = ()) -> dict:
    """{experiment: its sections} for every experiment in results, saying the verdicts of `judged` (the lab's
    findings): the sections rendered by `workers` forked processes (None: one per CPU, at most one per experiment;
    1: here), longest first. The sections are independent, so two processes halve the rendering. Fork, not spawn: a
    spawned process imports torch and matplotlib again. Forking a process whose torch has started OpenMP threads is
    safe only while the child runs no torch op (libgomp's pool does not survive fork: pytorch/pytorch#17199), and
    rendering runs none (tests/runner/test_lab.py checks it). Where fork is missing (Windows, macOS's default), or a
    rendering process dies, it renders here."""
    global _TO_RENDER
    cost = {e: i for i, e in enumerate(units.longest_first("render_cost"))}
    exps = sorted(results, key=lambda g: cost[split_group(g)[0]])
    workers = min(len(exps), os.cpu_count() or 1) if workers is None else workers
    here = lambda: {e: render(e, results[e]["results"], out, judged) for e in exps}   # noqa: E731
    if workers < 2 or len(exps) < 2 or sys.platform != "linux":
        return here()
    _TO_RENDER = (results, out, judged)
    try:
        with warnings.catch_warnings(), ProcessPoolExecutor(min(workers, len(exps)),
                                                            mp_context=mp.get_context("fork")) as pool:
            warnings.simplefilter("ignore", DeprecationWarning)   # Python >= 3.12 on forking a threaded process
            futs = {e: pool.submit(_render_forked, e) for e in exps}
            return {e: f.result() for e, f in futs.items()}
    except BrokenProcessPool:   # a rendering process died (killed, out of memory): render here instead
        return here()
    finally:
        _TO_RENDER = ()


def numbered(secs: dict) -> dict:
    """The sections with their numbers: one count over the report, in the report's order (a section's heading
    is "## <title>" as its experiment renders it; it reads "## <n>. <title>" in the report)."""
    n, out = 0, {}
    for group, parts in secs.items():
        out[group] = []
        for md, head in parts:
            n += 1
            out[group].append((md.replace("## ", f"## {n}. ", 1), head))
    return out


def _interval(f: dict) -> str:
    return f"{findings._num(f['value'])} [{findings._num(f['ci95'][0])}, {findings._num(f['ci95'][1])}]"


def negative_cell(prim: dict) -> str:
    """The design's negative control: measured on the run (the primary's `negative` detail, judged as the primary
    is), or declared (`Experiment.negative`), or the placebo where it is inert by design (`placebo_flat`), or none."""
    neg = prim.get("negative")
    e = X.get(prim["experiment"])
    if neg:
        alone = (" (it passes as the primary does: the primary's verdict is not the treatment's alone)"
                 if neg["verdict"] == findings.HOLDS == prim.get("verdict") else "")
        return f"{neg['claim']}: {_interval(neg)}: {neg['verdict']}{alone}"
    return e.negative or ("the placebo, inert by design" if e.placebo_flat else "—")


def primaries_table(fs: list[dict], groups, placebo: dict[str, dict], m: int) -> str:
    """One row per experiment and task: its primary claim with its control, its negative control, the design's
    room, the placebo's value, interval and verdict (before its premises gate it: at quick size a premise may fail)
    beside this run's, and its power at Holm's first level over the m primaries of the family; "demonstration" for
    an experiment with no primary (its premises only)."""
    rows = []
    for group in groups:
        exp, task = split_group(group)
        prim = _primary(fs, group)
        if prim is None:
            rows.append([f"`{exp}`", task, "demonstration (premises only)", "", "", "", "", "", "", ""])
            continue
        room = prim.get("room")
        p = placebo.get(group)
        rows.append([f"`{exp}`", task, prim["claim"], prim.get("control", "—"), negative_cell(prim),
                     f"[{findings._num(room[0])}, {findings._num(room[1])}]" if room else "—",
                     f"{_interval(p)}: {findings.ungated(p)}" if p else "not run",
                     pilot.power_cell(d := pilot.design_power(prim, p, m)), _interval(prim),
                     findings.verdict_cell(prim) + (" (underpowered)" if prim["verdict"] == findings.UNSURE and d
                                                    and d["power"] < power.TARGET else "")])
    return report.md_table(["experiment", "task", "primary claim", "control", "negative control", "room (design)",
                            "placebo [95 % CI]: verdict", "power (pilot: the placebo)", "value [95 % CI]", "verdict"],
                           rows)


def placebo_rate(placebo: dict[str, dict]) -> str:
    """The placebo lab in one sentence: how many primaries' placebos hold (before gating; none may), and which have
    no spread, with the reason each experiment declares (`Experiment.placebo_flat`)."""
    if not placebo:
        return "No placebo lab was run beside this one: each primary is judged by its own t test, with no floor."
    held = [g for g, p in placebo.items() if findings.ungated(p) == findings.HOLDS]
    flat, still = pilot.without_spread(placebo)
    why = {split_group(g)[0]: X.get(split_group(g)[0]).placebo_flat for g in flat}     # one reason per experiment
    return (f"Placebo holds: {len(held)} of {len(placebo)} primaries" + (f" ({', '.join(held)})" if held else "")
            + f". Replicates (an arm trained or sampled again on streams of its own, as the comparison's arms "
            f"are): {len(placebo) - len(flat)}, of which {len(still)} gave the same value at every seed on this run"
            + (f" ({', '.join(still)}: the statistic saturates there, e.g. neither arm reaches rl's target)"
               if still else "") + f". Without spread by design: {len(flat)}"
            + (" (" + "; ".join(f"`{e}`: {w}" for e, w in why.items()) + ")." if flat else "."))


def write_report(out: str, results: dict, meta: dict, workers: int | None = None, html: bool = True,
                 config_of: Callable | None = None) -> dict:
    """Build every section with results (render_all: `workers` processes), the tables of primaries, premises and
    findings on top; write report.md, findings.json and (html) report.html. config_of(name): the experiment's
    config (its primary's room)."""
    parts, heads = [], []
    placebo = pilot.placebo_verdicts(out)
    fs = lab_findings(results, config_of, placebo)         # judged once; the sections say these verdicts
    secs = render_all(results, out, workers, judged=fs)
    secs = numbered({g: secs[g] for g in results if g in secs})
    for group, parts_ in secs.items():
        for md, head in parts_:
            parts.append(md)
            heads.append(f"| {md.splitlines()[0][3:]} | {head} | {sum(results[group]['seconds']):.0f} s |")
    write_json(os.path.join(out, "findings.json"), fs)
    premises = [f for f in fs if f["kind"] == findings.PREMISE]
    claims = [f for f in fs if f["kind"] != findings.PREMISE]
    seeds = ", ".join(map(str, meta["seeds"])) + "".join(
        f"; {e} at {n} seeds (its power asks for them)" for e, n in sorted((meta.get("seeds_per") or {}).items()))
    quick = ("\n**Quick mode**: a small base model and tiny experiments that check the pipeline; the numbers are not "
             "results.\n" if meta["quick"] else "")
    run_tasks = list(dict.fromkeys(split_group(g)[1] for g in results))
    on = "; ".join(f"`{t}`, {T.get(t).summary}" for t in run_tasks)
    top = f"""# reasonlab: the lab report

A 200K-parameter GPT learns a step-checkable task ({on}; k = 2..8) and chooses how long to think: answer at once
(A), a short chain (S) or a full chain (T). Seeds {seeds}; mean ± std over seeds unless a line says otherwise;
"chance" is the best blind guess (digits: 0.1). Lab wall time {meta['wall_s']:.0f} s; the base models took
{meta.get('ran', {}).get('base models', 0.0):.0f} s of worker time to load or train (experiments reused from an
earlier run count their original time in the table).{quick}

## Lessons at a glance

{glance(secs, fs)}

Verdicts: {", ".join(f"{n} {v}" for v, n in findings.counts(fs).items())} (of {len(claims)} claims, premises apart;
primary claims corrected together with Holm's method).

## Primary claims

Each experiment asks one open question, its primary claim, or is a demonstration. Before any run its design fixes
the control, the range its statistic can reach ("room": a claim that could only pass, or only fail, is untestable)
and a placebo: the treatment arm replaced by the control run a second time on training and sampling streams of its
own (an independent replicate; where the control is exact, the treatment's procedure without its information:
passk's RL on a random reward), under which the claim must not hold (`reasonlab lab --placebo`, run by `make
results` at {pilot.placebo_size(out) or "(not run)"}; its verdict read before premises gate it). Its spread is a
floor: a primary holds only if it also clears its threshold with the larger of its own and its placebo's spread
(five seeds can miss a mode or a tail: `findings.floored`). The placebo is the pilot of the power too: with its spread, the
effect the primary must detect (with its source: `experiments/thresholds.py` EFFECTS), the seeds and Holm's first
level give the power of that test, the minimum detectable effect (MDE) at 80 % and the seeds 80 % would take
(`stats/power.py`); an inconclusive primary below 80 % is underpowered. The negative control is a known-inert
treatment or a known-biased alternative in the treatment's place: measured and judged as the primary is where the
design has one, else what it gives by definition.

{primaries_table(fs, list(results), placebo, pilot.family(results))}

{placebo_rate(placebo)}

Per task (Holm over the {pilot.family(results)} primaries of this run: every experiment with a primary on every task, a
family fixed by the lab's config before the run); a lesson replicates where it holds on two tasks or more.

{chr(10).join(findings.by_task(fs))}

## Premises

What the lessons rest on and the task makes true by construction: checked on this run, never counted as findings;
where one does not hold, the claims that rest on it are untestable.

{findings.table(premises) if premises else "(none)"}

## Findings

Each claim is checked on this run's results: the statistic (one value per seed), its 95 % t interval over seeds,
the per-seed values, the threshold, and the verdict read off the interval; "untestable" says why the design cannot
test it.

{findings.table(claims)}

| experiment | headline | compute time |
|---|---|---|
{chr(10).join(heads)}

### Thresholds

Fixed before the run (`reasonlab/experiments/thresholds.py`), each with its source:

{thresholds.table()}
"""
    return report.write_report(out, top + "\n" + "\n".join(parts), "reasonlab lab report", html=html)
