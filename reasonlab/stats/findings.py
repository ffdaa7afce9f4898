"""Findings as computed checks: each lesson the lab states is a function of the results that returns the claim,
the statistic with its 95 % interval and per-seed values, the threshold, and a verdict (holds / does not hold /
inconclusive) read off the interval. The report prints the verdict beside the claim; no sentence asserts a
finding by itself.

Intervals: with per-problem scores, a two-level bootstrap (seeds drawn with replacement, then each seed's
problems), so both the seed-to-seed and the problem-to-problem spread count; with one number per seed, Student's
t interval over seeds (3 seeds: mean ± 4.30 s / sqrt 3, wide on purpose). One seed gives no interval over seeds:
such a check is inconclusive unless per-problem scores decide it.
"""
from __future__ import annotations

import math

import numpy as np

HOLDS, FAILS, UNSURE = "holds", "does not hold", "inconclusive"

# two-sided 95 % Student t quantiles by degrees of freedom (scipy.stats.t.ppf(0.975, df))
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def seed_interval(values) -> tuple[float, tuple[float, float]]:
    """Mean over seeds and its 95 % t interval ((-inf, inf) from one seed)."""
    x = np.asarray(values, dtype=float)
    m = float(x.mean())
    if len(x) < 2:
        return m, (-math.inf, math.inf)
    h = T975.get(len(x) - 1, 1.96) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return m, (m - h, m + h)


def hier_bootstrap(arrays: list[tuple[np.ndarray, ...]], stat, n_boot: int = 1000, seed: int = 0):
    """stat(*arrays of one seed) averaged over seeds, its 95 % two-level bootstrap interval (seeds with
    replacement, then each seed's problems with replacement; paired arrays keep their pairing), and the per-seed
    values."""
    rng = np.random.default_rng(seed)
    vals = [float(stat(*a)) for a in arrays]
    boots = np.empty(n_boot)
    for b in range(n_boot):
        tot = 0.0
        for s in rng.integers(0, len(arrays), len(arrays)):
            n = len(arrays[s][0])
            idx = rng.integers(0, n, n)
            tot += float(stat(*(x[idx] for x in arrays[s])))
        boots[b] = tot / len(arrays)
    return float(np.mean(vals)), (float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))), vals


def greater(ci, thr: float) -> str:
    """The statistic exceeds thr: holds when the whole interval is above it, fails when the whole interval is at or
    below it."""
    return HOLDS if ci[0] > thr else FAILS if ci[1] <= thr else UNSURE


def at_most(ci, thr: float) -> str:
    """The statistic is at most thr: holds when the whole interval is at or below it."""
    return HOLDS if ci[1] <= thr else FAILS if ci[0] > thr else UNSURE


def both(*verdicts: str) -> str:
    """Every part must hold; any part that fails fails the claim."""
    return FAILS if FAILS in verdicts else HOLDS if all(v == HOLDS for v in verdicts) else UNSURE


def finding(section: str, claim: str, statistic: str, value: float, ci, per_seed, threshold: str, verdict: str,
            **detail) -> dict:
    """One checked claim, JSON-able."""
    r = lambda v: None if v is None or not math.isfinite(v) else round(float(v), 4)   # noqa: E731
    return {"section": section, "claim": claim, "statistic": statistic, "value": r(value),
            "ci95": [r(ci[0]), r(ci[1])], "per_seed": [r(v) for v in per_seed], "threshold": threshold,
            "verdict": verdict, **detail}


def missing(section: str, claim: str, why: str) -> dict:
    """A claim whose evidence this run did not produce: reported, inconclusive."""
    return {"section": section, "claim": claim, "statistic": why, "value": None, "ci95": [None, None],
            "per_seed": [], "threshold": "", "verdict": UNSURE}


def seed_check(section: str, claim: str, statistic: str, per_seed, threshold: float, test=greater, **detail) -> dict:
    """A claim about one number per seed, judged on its t interval."""
    m, ci = seed_interval(per_seed)
    sign = ">" if test is greater else "<="
    return finding(section, claim, statistic, m, ci, per_seed, f"{sign} {threshold:g}", test(ci, threshold), **detail)


def _num(v) -> str:
    return "—" if v is None else f"{v:.3f}"


def table(fs: list[dict]) -> str:
    """The findings table: claim, evidence (value [95 % CI]; per seed), threshold, verdict."""
    rows = ["| section | claim | statistic | value [95 % CI] | per seed | threshold | verdict |",
            "|---|---|---|---|---|---|---|"]
    for f in fs:
        ci = f["ci95"]
        val = "—" if f["value"] is None else f"{f['value']:.3f} [{_num(ci[0])}, {_num(ci[1])}]"
        rows.append(f"| {f['section']} | {f['claim']} | {f['statistic']} | {val} | "
                    f"{', '.join(_num(v) for v in f['per_seed'])} | {f['threshold']} | **{f['verdict']}** |")
    return "\n".join(rows)


def verdict_line(f: dict) -> str:
    """One sentence for a section's text: the claim and what this run says of it."""
    ci = f["ci95"]
    ev = "" if f["value"] is None else f" ({f['statistic']} = {f['value']:.3f}, 95 % CI [{_num(ci[0])}, {_num(ci[1])}], threshold {f['threshold']})"
    return f"**{f['verdict'].capitalize()}** on this run: {f['claim'][0].lower() + f['claim'][1:]}{ev}."
