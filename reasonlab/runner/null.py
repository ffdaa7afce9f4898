"""The null simulation through the experiments' own claims: every claim of a finished lab run, its per-seed
statistics drawn exactly at its threshold, judged by the lab's code. How often does each kind of claim "hold" when
it is false?

What it keeps of the run: its results, on which each experiment's `claims()` runs as in the lab (so the claims, their
thresholds and tests, the parts of a two-part claim, rooms, premises and `requires` are the experiments' own), each
claim's seed count, and the spread of its per-seed values on the run (the scale of the draws; `FLAT_SD` where the run
had none). What it draws: inside `claims()`, every `seed_check` judges values drawn at its threshold
(`findings.drawn`) in place of the run's: the seed-to-seed deviations of a shape (`stats.null.seed_spread`: normal,
skewed, bimodal, censored), turned as for a "greater" claim there (most seeds a little on the claim's side, the
long tail against it) and mirrored for an "at most" one. A two-part claim has both parts at their thresholds (it
then holds about 2.5 % squared of the time); its worst case, one part true, is its other part's kind's rate. Each premise
is taken to hold (the worst case: no gate hides a claim); each primary is floored by a placebo drawn alike at as many
seeds (none where the experiment's placebo is flat by design, as in the lab); Holm corrects over the family the
registry declares for the run (`pilot.family`).

`python -m reasonlab.runner.null --out results/lab --labs 200 --shape skewed` prints the rate of false holds per
claim kind (primary or secondary; greater than 0, greater than a margin, at most, both parts) with its Monte-Carlo
standard error and the bound 2.5 % + 3 standard errors, the worst single claim, and the family-wise rate after Holm.
`stats.null` is the same question on synthetic claims, fast enough for many thousands of labs.
"""
from __future__ import annotations

import argparse
import json
import math
import os
from collections import defaultdict

import numpy as np

from .. import experiments as X
from ..stats import findings
from ..stats.findings import ALPHA, HOLDS, PREMISE, PRIMARY, TOL, UNTESTABLE
from ..stats.null import seed_spread
from . import lab, pilot
from .config import LabConfig, split_group

FLAT_SD = 0.01
"""the spread of the draws for a claim whose per-seed values were all equal on the run"""
SHAPES = ("normal", "skewed", "bimodal", "censored")


def finished(out: str) -> tuple[dict, LabConfig]:
    """The run at `out` ({group: {"results": [...]}}) and the lab config it ran with (its seeds, per experiment)."""
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        ran = json.load(f)
    cfg = LabConfig(all=True, out=out, seeds=tuple(ran.get("seeds", (0, 1, 2, 3, 4))), seeds_per=lab.ran_seeds(out))
    results = lab.load_results(out, cfg.seeds_of)
    if not results:
        raise ValueError(f"no finished experiments in {out}")
    return results, cfg


def kind(f: dict) -> str:
    """A claim's kind for the rates: its role (a primary floored by its placebo's spread, or judged by its t test
    alone where its experiment's placebo is flat by design; a secondary: the t test alone) and its test
    ("secondary: both")."""
    sign, thr = (f["threshold"].split() + ["", ""])[:2]
    test = ("both" if "(and" in f["threshold"] else "at most" if sign == "<=" else
            "greater" if float(thr or 0) == 0 else "margin")
    role = ("primary, t alone" if X.get(f["experiment"]).placebo_flat else "primary, floored") if f.get("primary") \
        else "secondary"
    return f"{role}: {test}"


def spread(per_seed) -> tuple[int, float]:
    """(seeds, the sd the draws take) of a claim's per-seed values on the run."""
    n, sd = pilot.spread(per_seed)
    return max(n, 2), sd if sd > TOL else FLAT_SD


def primary_spreads(results: dict, cfg: LabConfig) -> dict[str, tuple[int, float]]:
    """{group: spread of its primary's per-seed values on the run}: the scale of its placebo's draws."""
    out = {}
    for group, got in results.items():
        exp = split_group(group)[0]
        for f in lab.experiment_claims(exp, got["results"], cfg.config_of(group)):
            if f["primary"]:
                out[group] = spread(f["per_seed"])
    return out


def one_lab(results: dict, cfg: LabConfig, shape: str, rng: np.random.Generator,
            placebos: dict[str, tuple[int, float]]) -> list[dict]:
    """Every claim of the run judged once on draws at its threshold (see the module docstring), after Holm;
    placebos: primary_spreads, the seeds and scale of each primary's placebo draws."""
    def deviations(n: int, sd: float) -> np.ndarray:
        return seed_spread(rng, (1, n), shape)[0] * sd

    def draw(thr: float, sign: str, per_seed) -> list[float]:
        dev = deviations(*spread(per_seed))
        return list(thr + (dev if sign == ">" else -dev))

    out = []
    with findings.drawn(draw):
        for group, got in results.items():
            exp, task = split_group(group)
            config = cfg.config_of(group)
            fs = [{**f, "verdict": HOLDS} if f["kind"] == PREMISE else f
                  for f in lab.experiment_claims(exp, got["results"], config)]
            fs = findings.judge(fs, lab.room_of(exp, config))
            for f in fs:
                if f["primary"] and not X.get(exp).placebo_flat and group in placebos:
                    f = findings.floored(f, list(deviations(*placebos[group])))
                out.append({**f, "task": task, "held_alone": f["verdict"] == HOLDS})
    return findings.holm(out, family=pilot.family(results))


def simulate(out: str, labs: int, shape: str = "normal", seed: int = 0) -> dict:
    """`labs` simulated labs over the run at `out`: per claim kind, the false holds (a primary before Holm, as its
    own level), the number of claims and trials, the worst claim; the family-wise rate of the primaries after Holm
    (any primary holds; and any of those floored by a placebo).
    A claim untestable by its design (room, declared: the premises hold here), or with no evidence on the run, is
    left out."""
    results, cfg = finished(out)
    placebos = primary_spreads(results, cfg)
    rng = np.random.default_rng(seed)
    held: dict[tuple, int] = defaultdict(int)
    kinds: dict[tuple, str] = {}
    familywise = floored = 0
    with X.reusing():
        for _ in range(labs):
            fs = one_lab(results, cfg, shape, rng, placebos)
            for f in fs:
                if f["kind"] == PREMISE or f["value"] is None or f["verdict"] == UNTESTABLE:
                    continue
                key = (f["experiment"], f["task"], f["claim"])
                kinds[key] = kind(f)
                held[key] += f["held_alone"]
            familywise += any(f["kind"] == PRIMARY and f["verdict"] == HOLDS for f in fs)
            floored += any(f["kind"] == PRIMARY and f["verdict"] == HOLDS and not X.get(f["experiment"]).placebo_flat
                           for f in fs)
    rows = {}
    for k in sorted(set(kinds.values())):
        keys = [c for c in kinds if kinds[c] == k]
        n, h = len(keys) * labs, sum(held[c] for c in keys)
        worst = max(keys, key=lambda c: held[c])
        rows[k] = {"claims": len(keys), "trials": n, "rate": h / n, "se": _se(h / n, n),
                   "worst": {"claim": " / ".join(worst), "rate": held[worst] / labs, "se": _se(held[worst] / labs, labs)}}
    r, rf = familywise / labs, floored / labs
    return {"shape": shape, "labs": labs, "kinds": rows, "family": pilot.family(results),
            "familywise": {"rate": r, "se": _se(r, labs)}, "familywise_floored": {"rate": rf, "se": _se(rf, labs)}}


def _se(r: float, n: int) -> float:
    """A rate's Monte-Carlo standard error, at least the one it would have at ALPHA (a rate of 0 is not certain)."""
    return math.sqrt(max(r * (1 - r), ALPHA * (1 - ALPHA)) / n)


def within(rate: float, se: float) -> bool:
    """The bound a null rate must keep: ALPHA + 3 Monte-Carlo standard errors."""
    return rate <= ALPHA + 3 * se


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="False 'holds' of the experiments' own claims under the null, judged "
                                 "by the lab's code over a finished run.")
    ap.add_argument("--out", default="results/lab", help="the finished lab run whose claims are drawn")
    ap.add_argument("--labs", type=int, default=200, help="simulated labs per shape")
    ap.add_argument("--shape", choices=SHAPES, nargs="+", default=list(SHAPES), help="seed-to-seed spread shapes")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    for shape in args.shape:
        s = simulate(args.out, args.labs, shape, args.seed)
        print(f"{shape} seed spread, {s['labs']} labs:")
        for k, row in s["kinds"].items():
            w = row["worst"]
            print(f"  {k:<29} {row['claims']:>3} claims: false holds {row['rate']:.4f} (MC SE {row['se']:.4f}; bound "
                  f"{ALPHA + 3 * row['se']:.4f}{'' if within(row['rate'], row['se']) else ': OUTSIDE'}); worst "
                  f"{w['rate']:.3f} ({w['claim'][:70]})")
        for what, fw in (("", s["familywise"]), (", a floored one", s["familywise_floored"])):
            print(f"  Holm over {s['family']} primaries{what}: family-wise {fw['rate']:.4f} (MC SE {fw['se']:.4f}; "
                  f"bound {ALPHA + 3 * fw['se']:.4f}{'' if within(fw['rate'], fw['se']) else ': OUTSIDE'})")


if __name__ == "__main__":
    main()
