"""A null simulation of the lab's whole verdict pipeline: how often does a claim "hold" when its effect is exactly
at its threshold (the worst case of a true null)?

Each simulated lab scores every seed as the lab does: every (experiment, seed) draws its own test problems from the
test part (core.problems.test_problems), a k whose test part is small is enumerated whole (k = 2: 25 problems,
k = 3: 250) and the others sampled (n per k from a large population); a seed's statistic is the mean over k of the
treatment-minus-control accuracy on its problems, answered greedily (one answer per model and problem). The effect
differs from problem to problem (spread `tau`: the two arms answer some problems differently) and from seed to seed
(each seed trains models of its own: spread `seed_sd`). Under the null the effect over the problem population is
exactly the threshold. `shared=True` scores every seed on one draw, as the lab did
before: the problems' sampling error is then common to all seeds, and the t interval over seeds misses it.

The per-seed values then go through the verdict code the lab runs: `seed_check` (greater, at_most, margins),
`both`, the room rule (`with_room`), the premise gate (`gate`), each primary's floor from its placebo (`floored`:
the placebo an independent replicate drawn like the seeds, with no effect) and Holm over every primary (`holm`, on
unrounded p values). `python -m reasonlab.stats.null` prints each case's rate of false "holds" with its Monte-Carlo standard
error; the bound is 2.5 % + 3 standard errors (tests/stats/test_null.py).
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import numpy as np

from . import findings
from .findings import ALPHA, HOLDS, at_most, both, finding, gate, greater, holm, premise, primary, seed_check, with_room

KS = {2: 25, 3: 250, 4: None, 5: None, 6: None, 7: None, 8: None}
"""k -> the size of its test part where it is enumerated whole (None: sampled, n problems per seed)."""


@dataclass(frozen=True)
class Design:
    seeds: int = 5
    """seeds per lab"""
    n_test: int = 500
    """test problems per k and seed where k is sampled"""
    tau: float = 0.3
    """spread of the treatment-minus-control effect from problem to problem"""
    seed_sd: float = 0.01
    """spread of the effect from seed to seed (each seed a model of its own)"""
    shared: bool = False
    """every seed scored on one draw of problems (the lab's old design)"""
    shape: str = "normal"
    """the seed-to-seed spread's shape, mean 0 and sd seed_sd: "normal"; "skewed" (a long left tail: most seeds a
    little above the mean, a few far below, as a run that sometimes fails); "bimodal" (two seeds in five far below,
    the rest a little above: as l1's, where 2 of 5 seeds learn); "censored" (a normal cut at one sd above its mean,
    as rl's steps to a target are cut at the run's length)"""
    placebo: bool = True
    """each primary judged with its placebo's spread as a floor, as the lab judges it beside a placebo lab (False:
    the t test alone, as a lab with no placebo run beside it)"""


def seed_values(rng: np.random.Generator, labs: int, effect: float, d: Design) -> np.ndarray:
    """(labs, seeds) per-seed statistics: the mean over k of a seed's treatment-minus-control accuracy, under a
    population effect of `effect` at every k."""
    out = np.zeros((labs, d.seeds))
    for size in KS.values():
        n = size or d.n_test
        # the mean effect over this seed's problems: the population mean where k is enumerated (size given); a
        # sample of n from a large population else (drawn once per lab when the seeds share their problems)
        draws = np.zeros((labs, d.seeds)) if size else rng.normal(0, d.tau / math.sqrt(n),
                                                                     (labs, 1 if d.shared else d.seeds))
        out += effect + draws
    out /= len(KS)
    return out + seed_spread(rng, (labs, d.seeds), d.shape) * d.seed_sd


def seed_spread(rng: np.random.Generator, size: tuple[int, int], shape: str) -> np.ndarray:
    """Standardised seed-to-seed deviations (mean 0, sd 1) of the given shape."""
    if shape == "normal":
        return rng.normal(0, 1, size)
    if shape == "skewed":                  # minus a lognormal (sigma 1), standardised: skewness about -6
        x = -rng.lognormal(0, 1, size)
        m, v = -math.exp(0.5), (math.exp(1) - 1) * math.exp(1)
        return (x - m) / math.sqrt(v)
    if shape == "bimodal":                 # -a with probability 2/5, +b otherwise: mean 0, sd 1
        q = 0.4
        a, b = math.sqrt((1 - q) / q), math.sqrt(q / (1 - q))
        return np.where(rng.random(size) < q, -a, b)
    if shape == "censored":                # a normal cut at +1 (rl's steps: a run that never gets there counts
        z = np.minimum(rng.normal(0, 1, size), 1.0)   # as the step limit), standardised: about 16 % of seeds at the cap
        m = -math.exp(-0.5) / math.sqrt(2 * math.pi) + 0.5 * math.erfc(1 / math.sqrt(2))
        ez2 = 0.5 * (1 + math.erf(1 / math.sqrt(2))) - math.exp(-0.5) / math.sqrt(2 * math.pi) \
            + 0.5 * math.erfc(1 / math.sqrt(2))
        return (z - m) / math.sqrt(ez2 - m * m)
    raise ValueError(f"unknown shape {shape!r}: normal, skewed, bimodal or censored")


def claim(kind: str, values: list[np.ndarray], thr: float, pilot: np.ndarray | None = None) -> dict:
    """One claim of the given kind on per-seed values, through the verdict code; pilot: the per-seed values of a
    primary's placebo (None: none was run)."""
    if kind == "at_most":
        return seed_check("null", "at most the margin", "s", values[0], thr, test=at_most)
    if kind == "both":
        a, b = (seed_check("null", "", "", v, thr) for v in values)
        return finding("null", "both parts", "s", a["value"], a["ci95"], a["per_seed"], f"> {thr:g}",
                       both(a["verdict"], b["verdict"]), p=max(a["p"], b["p"]))
    f = primary(seed_check("null", "beats the control", "s", values[0], thr, test=greater))
    if kind == "room":
        f = with_room(f, (-1.0, 1.0))
    if kind == "gated":
        f = gate([premise(seed_check("null", "the premise", "s", [1.0, 1.1, 0.9, 1.05, 0.95], 0.0)), f])[1]
    return findings.floored(f, None if pilot is None else list(pilot))


CASES = {"greater": ("greater", 0.0), "margin": ("greater", 0.05), "at_most": ("at_most", 0.05),
         "both": ("both", 0.0), "room": ("room", 0.0), "gated": ("gated", 0.0)}
"""The claim kinds the lab's experiments state: name -> (kind, threshold); the null effect sits at the threshold."""


def rate(case: str, labs: int, design: Design = Design(), seed: int = 0) -> tuple[float, float]:
    """The share of `labs` simulated labs in which a claim of this case holds under its null, with its
    Monte-Carlo standard error."""
    kind, thr = CASES[case]
    rng = np.random.default_rng(seed)
    parts = [seed_values(rng, labs, thr, design) for _ in range(2 if kind == "both" else 1)]
    pilots = seed_values(rng, labs, 0.0, design) if design.placebo else [None] * labs
    held = sum(claim(kind, [v[i] for v in parts], thr, pilots[i])["verdict"] == HOLDS for i in range(labs))
    r = held / labs
    return r, math.sqrt(max(r * (1 - r), ALPHA * (1 - ALPHA)) / labs)


def familywise(labs: int, primaries: int = 52, design: Design = Design(), seed: int = 0) -> tuple[float, float]:
    """The share of labs in which at least one of `primaries` independent primaries holds after Holm's correction,
    every one under its null: the family-wise error rate of the lab's primaries."""
    rng = np.random.default_rng(seed)
    values = seed_values(rng, labs * primaries, 0.0, design).reshape(labs, primaries, design.seeds)
    pilots = (seed_values(rng, labs * primaries, 0.0, design).reshape(labs, primaries, design.seeds)
              if design.placebo else [[None] * primaries] * labs)
    hit = 0
    for lab, pilot in zip(values, pilots):
        fs = [{**claim("greater", [v], 0.0, p), "experiment": str(i)} for i, (v, p) in enumerate(zip(lab, pilot))]
        hit += any(f["verdict"] == HOLDS for f in holm(fs))
    r = hit / labs
    return r, math.sqrt(max(r * (1 - r), ALPHA * (1 - ALPHA)) / labs)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="False 'holds' of the lab's verdict pipeline under the null.")
    ap.add_argument("--labs", type=int, default=20_000, help="simulated labs per case")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--primaries", type=int, default=52,
                    help="primaries Holm corrects over (the committed lab's family: 13 experiments with a primary "
                    "on 4 tasks)")
    ap.add_argument("--no-placebo", action="store_true",
                    help="judge the primaries by the t test alone, as a lab with no placebo lab beside it")
    args = ap.parse_args(argv)
    pl = not args.no_placebo
    designs = [Design(seed_sd=sd, shared=sh, placebo=pl) for sd in (0.005, 0.02) for sh in (False, True)]
    for d in designs + [Design(seed_sd=0.02, shape=shape, placebo=pl) for shape in ("skewed", "bimodal", "censored")]:
        print(f"seed spread {d.seed_sd} ({d.shape}), "
              f"{'one problem draw shared by the seeds' if d.shared else 'problems per seed'}, "
              f"{'primaries floored by a placebo' if d.placebo else 'the t test alone'}:")
        for case in CASES:
            r, se = rate(case, args.labs, d, args.seed)
            print(f"  {case:<8} false holds {r:.4f} (MC SE {se:.4f}; bound {ALPHA + 3 * se:.4f})")
        r, se = familywise(args.labs, args.primaries, design=d, seed=args.seed)
        print(f"  Holm over {args.primaries} primaries: family-wise {r:.4f} (MC SE {se:.4f}; bound "
              f"{ALPHA + 3 * se:.4f})")


if __name__ == "__main__":
    main()
