"""The README's generated blocks, the findings (read off a findings.json: the README never types a verdict) and the
tasks' table (read off the base experiment's per-seed results per task), and the difference between two runs'
findings. `make results` writes the blocks; a test fails when README and results disagree.
"""
from __future__ import annotations

import json
import os

from .. import experiments as X
from .. import tasks as T
from ..io.checkpoint import write_text
from ..stats.findings import FAILS, HOLDS, PREMISE, UNSURE, UNTESTABLE, by_task, cell, counts, held_on, ungated
from .config import group_of
from .pilot import without_spread
from .store import Store

BEGIN = "<!-- findings: written by `make results` from results/lab/findings.json; do not edit by hand -->"
END = "<!-- /findings -->"
TASKS_BEGIN = "<!-- tasks: written by `make results` from results/lab; do not edit by hand -->"
TASKS_END = "<!-- /tasks -->"


def _num(v) -> str:
    return "—" if v is None else f"{v:.3f}"


def load(path: str) -> list[dict]:
    """A findings.json (a run directory holding one, or the file itself): a list of claims."""
    if os.path.isdir(path):
        path = os.path.join(path, "findings.json")
    with open(path, encoding="utf-8") as f:
        fs = json.load(f)
    if not isinstance(fs, list) or not all(isinstance(x, dict) and "claim" in x and "verdict" in x for x in fs):
        raise ValueError(f"{path} is not a findings file (a list of claims with their verdicts)")
    return fs


def placebo_line(fs: list[dict]) -> str:
    """The placebo lab in one sentence: of its primaries (every experiment's on every task it ran), how many hold
    before their premises gate them (none may), how many have no spread by design (`Experiment.placebo_flat`) and
    which of the others gave one value at every seed on this run (a statistic that saturates there)."""
    prim = {group_of(f["experiment"], f.get("task", "digits")): f for f in fs if f.get("primary")}
    name = {g: f"{f['experiment']} ({f.get('task', 'digits')})" for g, f in prim.items()}
    held = [name[g] for g, f in prim.items() if ungated(f) == HOLDS]
    by_design, still = without_spread(prim)
    tasks = [t for t in T.names() if any(f.get("task", "digits") == t for f in prim.values())]
    return (f"Placebos (each primary's control run again in its treatment's place, on streams of its own; "
            f"{', '.join(tasks)}): {len(held)} of {len(prim)} hold" + (f" ({', '.join(held)})" if held else "")
            + f"; {len(by_design)} have no spread by design"
            + (f"; {len(still)} gave one value at every seed on this run ({', '.join(name[g] for g in still)})."
               if still else "."))


def block(fs: list[dict], report: str = "results/lab/report.md", placebo: list[dict] | None = None) -> str:
    """One row per experiment: its primary claim (with its control), the statistic's value and interval, the
    verdict, or "demonstration" for one with no primary; then the counts. With several tasks, a column per task and
    the tasks each primary holds on (findings.by_task): a lesson replicates where it holds on two or more."""
    if len({f.get("task", "digits") for f in fs}) > 1:
        return _many(fs, report, placebo)
    rows = ["| experiment: its question | primary claim (control) | value [95 % CI] | verdict |", "|---|---|---|---|"]
    for exp, task in dict.fromkeys((f["experiment"], f.get("task", "digits")) for f in fs):
        name = f"`{exp}`: {X.BUILTIN[exp]}" if exp in X.BUILTIN else f"`{exp}`"
        f = next((f for f in fs if f["experiment"] == exp and f.get("task", "digits") == task and f.get("primary")),
                 None)
        if f is None:
            rows.append(f"| {name} | demonstration: its premises only | | |")
            continue
        ci = f["ci95"]
        val = "—" if f["value"] is None else f"{f['value']:.3f} [{_num(ci[0])}, {_num(ci[1])}]"
        control = f" (control: {f['control']})" if f.get("control") else ""
        rows.append(f"| {name} | {cell(f['claim'] + control)} | {val} | {f['verdict']} |")
    return "\n".join([BEGIN, *rows, "", _tail(fs, report, placebo), END])


def _many(fs: list[dict], report: str, placebo: list[dict] | None = None) -> str:
    where = held_on(fs)
    again = [e for e, ts in where.items() if len(ts) > 1]
    rows = by_task(fs, name=lambda e: f"`{e}`: {X.BUILTIN[e]}" if e in X.BUILTIN else f"`{e}`")
    lead = (f"Replicated (the primary holds on two tasks or more): {', '.join(f'`{e}`' for e in again) or 'none'}; "
            f"on one task only: {', '.join(f'`{e}` ({ts[0]})' for e, ts in where.items() if len(ts) == 1) or 'none'}"
            f"; on none: {', '.join(f'`{e}`' for e, ts in where.items() if not ts) or 'none'}.")
    return "\n".join([BEGIN, *rows, "", lead, "", _tail(fs, report, placebo), END])


def _tail(fs: list[dict], report: str, placebo: list[dict] | None = None) -> str:
    n = counts(fs)
    claims = sum(f.get("kind") != PREMISE for f in fs)
    return (f"{claims} claims in all: {n[HOLDS]} hold, {n[FAILS]} do not hold, {n[UNSURE]} are inconclusive, "
            f"{n[UNTESTABLE]} untestable (premises apart); primary claims are corrected together (Holm). "
            + (placebo_line(placebo) + " " if placebo else "")
            + f"The full table, with per-seed values, thresholds and their sources, the premises, each primary's "
            f"room, negative control and placebo, is in [the report]({report}).")


def tasks_block(run: str, report: str = "results/lab/report.md") -> str:
    """How far a direct answer goes on each task: the base experiment's forced A per k (mean over seeds), beside the
    best blind guess and the chains' lowest accuracy over k (forced S and T), from the base results of the lab run
    at `run` (its config.json names the seeds)."""
    with open(os.path.join(run, "config.json"), encoding="utf-8") as f:
        seeds = json.load(f)["seeds"]
    found = Store(run).collect([group_of("base", t) for t in T.names()], seeds)    # the registry's tasks, in order
    base = {t: found[group_of("base", t)]["results"] for t in T.names() if group_of("base", t) in found}
    if not base:
        raise ValueError(f"{run} holds no results of the base experiment")
    ks = sorted({int(k) for rs in base.values() for k in rs[0]["A"]["acc_by_k"]})

    def mean(rs: list[dict], fmt: str, k: int) -> float:           # the keys are ints, or strings as JSON wrote them
        return sum({int(j): v for j, v in r[fmt]["acc_by_k"].items()}[k] for r in rs) / len(rs)
    rows = ["| task: what it asks | chance | " + " | ".join(f"A, k = {k}" for k in ks) + " | S, T: lowest over k |",
            "|---|---|" + "---|" * len(ks) + "---|"]
    for spec, rs in base.items():
        task, own = T.get(spec), [int(k) for k in rs[0]["A"]["acc_by_k"]]
        cells = [f"{mean(rs, 'A', k):.2f}" if k in own else "" for k in ks]
        chains = " / ".join(f"{min(mean(rs, f, k) for k in own):.2f}" for f in ("S", "T"))
        worst = max(task.chance(k) for k in own)
        chance = f"{worst:.2g}" if all(task.chance(k) == worst for k in own) else f"≤ {worst:.2g}"
        rows.append(f"| `{spec}`: {task.summary} | {chance} | " + " | ".join(cells) + f" | {chains} |")
    tail = (f"Greedy accuracy of the base model forced to answer at once (A) per k, mean over seeds {min(seeds)}–"
            f"{max(seeds)}, each seed on its own test draw (a k whose test part is small: all of it); chance: the "
            f"commonest answer's share (at most, over k); per-seed values and plots in [the tasks' report]({report}).")
    return "\n".join([TASKS_BEGIN, *rows, "", tail, TASKS_END])


def _put(text: str, begin: str, end: str, body: str, readme: str) -> str:
    if begin not in text or end not in text:
        raise ValueError(f"{readme} has no generated block {begin} ... {end}")
    head, rest = text.split(begin, 1)
    return head + body + rest.split(end, 1)[1]


def sync(readme: str, findings: str, check: bool = False, tasks: str | None = None) -> bool:
    """Write the findings block (and, given the tasks' lab run, the tasks' table) into `readme` between their
    markers, with the placebo lab stored beside the findings (<run>/placebo) where there is one; with check, only
    say whether it is up to date. Returns whether the README is (check) or was (write)
    already up to date."""
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    beside = os.path.join(findings if os.path.isdir(findings) else os.path.dirname(findings), "placebo")
    placebo = load(beside) if os.path.exists(os.path.join(beside, "findings.json")) else None
    new = _put(text, BEGIN, END, block(load(findings), placebo=placebo), readme)
    if tasks is not None:
        new = _put(new, TASKS_BEGIN, TASKS_END, tasks_block(tasks), readme)
    if new != text and not check:
        write_text(readme, new)
    return new == text


def diff(a: str, b: str) -> list[str]:
    """What moved between two runs: each claim (matched by experiment, task and claim text) whose verdict changed, and
    the claims only one run has."""
    fa, fb = ({(f.get("experiment", f.get("section")) + ("" if f.get("task", "digits") == "digits" else
                                                         f" ({f['task']})"), f["claim"]): f for f in load(p)}
              for p in (a, b))
    out = []
    for k in fa.keys() | fb.keys():
        x, y = fa.get(k), fb.get(k)
        if x is None or y is None:
            out.append(f"{'only in ' + (b if x is None else a)}: {k[0]}: {k[1]}")
        elif x["verdict"] != y["verdict"]:
            out.append(f"{k[0]}: {k[1]}: {x['verdict']} ({_num(x['value'])}) -> {y['verdict']} ({_num(y['value'])})")
    return sorted(out)
