"""The placebo lab beside a run (<out>/placebo, `reasonlab lab --placebo`) as the pilot of the run's primaries: its
findings, the power each primary has at the run's seeds with its placebo's spread, and the seeds each experiment
would need for 80 % (`LabConfig.power_seeds` runs them, within a budget). The pilot is a run apart from the verdict:
its treatment arm replicates the control on streams of its own, so its spread is the comparison's under the null.
"""
from __future__ import annotations

import json
import os

import numpy as np

from .. import experiments as X
from ..experiments import thresholds
from ..stats import findings, power
from .config import LabConfig, group_of, split_group


def primaries(path: str) -> dict[str, dict]:
    """{group: its primary finding} of a lab's findings.json ({} where there is none)."""
    try:
        with open(path, encoding="utf-8") as f:
            return {group_of(p["experiment"], p.get("task", "digits")): p for p in json.load(f) if p.get("primary")}
    except (OSError, ValueError, TypeError, KeyError):
        return {}


def family(groups) -> int:
    """How many primaries a lab over these store groups asks: one per (experiment that declares a primary, task). An
    experiment declares one by having a placebo (`Experiment.placebo`); the others are demonstrations."""
    return sum(X.get(split_group(g)[0]).placebo is not None for g in groups)


def placebo_verdicts(out: str) -> dict[str, dict]:
    """{group: its primary finding} of the placebo lab stored beside this run (<out>/placebo/findings.json,
    `reasonlab lab --placebo`), if there is one."""
    return primaries(os.path.join(out, "placebo", "findings.json"))


def without_spread(placebos: dict[str, dict]) -> tuple[list[str], list[str]]:
    """Of the placebos ({group: its primary finding}), the groups without a spread: those flat by design
    (`Experiment.placebo_flat`), and those of the others that gave one value at every seed on the run (a statistic
    that saturates there; a placebo the run left without values is neither)."""
    flat = [g for g, p in placebos.items() if p["experiment"] in X.names() and X.get(p["experiment"]).placebo_flat]
    still = [g for g, p in placebos.items() if g not in flat and p.get("per_seed") and len(set(p["per_seed"])) < 2]
    return flat, still


def placebo_size(out: str) -> str:
    """How the placebo lab beside this run was run: its size and seeds ("" where there is none)."""
    try:
        with open(os.path.join(out, "placebo", "config.json"), encoding="utf-8") as f:
            c = json.load(f)
        return (f"{'quick' if c['quick'] else 'full'} size, seeds {', '.join(map(str, c['seeds']))}"
                + "".join(f"; {e} at {n}" for e, n in sorted((c.get("seeds_per") or {}).items())))
    except (OSError, ValueError, TypeError, KeyError):
        return ""


def spread(per_seed, first: int | None = None) -> tuple[int, float]:
    """A placebo's seeds (its first `first`, None: all) and their standard deviation (0 where fewer than two)."""
    x = [v for v in (per_seed or [])[:first] if v is not None]
    return len(x), float(np.std(x, ddof=1)) if len(x) > 1 else 0.0


def design_power(prim: dict, pilot: dict | None, m: int) -> dict | None:
    """Power by design of a primary (stats.power, of the test the lab runs: floored by the pilot's spread): the
    spread of its placebo (the pilot: a run apart from the verdict, its treatment a replicate of the control), the
    smallest effect it must detect (thresholds.EFFECTS), the run's seeds, and the first level of Holm's correction
    over the m primaries. None where there is no pilot or the pilot has no spread."""
    k, sd = spread((pilot or {}).get("per_seed"))
    if sd <= 0:
        return None
    effect, n, alpha = thresholds.EFFECTS[prim["experiment"]].value, len(prim["per_seed"]), findings.ALPHA / max(m, 1)
    return {"sd": sd, "effect": effect, "power": power.power(effect, sd, n, alpha, k),
            "mde": power.mde(sd, n, alpha, pilot=k), "seeds": power.seeds_for(effect, sd, alpha, pilot="n")}


def power_cell(d: dict | None) -> str:
    if d is None:
        return "— (no pilot spread)"
    seeds = f"{d['seeds']} seeds" if d["seeds"] else f"over {power.MOST_SEEDS} seeds"
    return f"{d['power']:.2f} for {d['effect']:g} (MDE {findings._num(d['mde'])}; 80 %: {seeds})"


def power_seeds(cfg: LabConfig) -> dict[str, int]:
    """experiment -> the seeds its primary needs for 80 % power on every task of the run (power.seeds_for, of the
    floored test with its placebo at as many seeds, at the effect it must detect and Holm's first level over the
    run's primaries); only where that is more than the run's seeds and at most cfg.most_seeds (the time budget). An
    experiment that needs more on some task keeps the run's seeds (its report says underpowered); one with no pilot
    spread on a task is planned from the tasks that have one.

    The pilot is the placebo lab's first len(cfg.seeds) seeds: <out>/placebo for a lab, the placebo lab's own
    findings for a placebo lab (`make results` runs it first at the run's seeds, then at the planned ones), so the
    placebo lab and the lab beside it plan the same seeds, whatever seeds the placebo has run since."""
    pilots = primaries(os.path.join(cfg.out, "findings.json")) if cfg.placebo else placebo_verdicts(cfg.out)
    runs = [g for g, _ in cfg.runs()]
    alpha = findings.ALPHA / max(family(runs), 1)
    need: dict[str, list] = {}
    for group in runs:
        exp = split_group(group)[0]
        sd = spread(pilots.get(group, {}).get("per_seed"), len(cfg.seeds))[1]
        if sd > 0:
            need.setdefault(exp, []).append(power.seeds_for(thresholds.EFFECTS[exp].value, sd, alpha,
                                                            most=cfg.most_seeds, pilot="n"))
    return {e: max(ns) for e, ns in need.items() if None not in ns and max(ns) > len(cfg.seeds)}
