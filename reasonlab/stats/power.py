"""Power by design for a primary's one-sided t test over seeds (findings.p_value): the chance that it holds when the
true mean clears its threshold by `effect`, the smallest effect it detects with 80 % power, and the seeds that
would take.

The spread comes from a pilot kept apart from the verdict: the placebo lab (`reasonlab lab --placebo`), whose
treatment arm replicates the control on streams of its own, so that its per-seed spread is the spread of the
comparison under the null. The level is the first step of Holm's correction over the primaries (alpha / m): the
level the most significant primary must pass, which no later step makes easier, so the power is a lower bound.
"""
from __future__ import annotations

import math

import numpy as np

from .findings import t_quantile

TARGET = 0.8
"""the power a primary is designed for"""
MOST_SEEDS = 64
"""seeds_for looks no further"""


def power(effect: float, sd: float, n: int, alpha: float) -> float:
    """P(the one-sided t test at level alpha rejects "mean <= threshold") with n seeds whose values are normal with
    standard deviation sd and mean threshold + effect. Exact up to quadrature: T = (Z + lam) / sqrt(V / df) with
    V chi-square on df = n - 1, so the power is E_V[P(Z > t_c sqrt(V / df) - lam)] (a noncentral t)."""
    if n < 2 or sd <= 0:
        return math.nan
    df, lam = n - 1, effect * math.sqrt(n) / sd
    tc = t_quantile(1 - alpha, df)
    u = np.linspace(1e-12, math.sqrt(df + 60 * math.sqrt(2 * df) + 60), 40_001)     # v = u^2: no pole at 0
    log_pdf = (df - 1) * np.log(u) - u * u / 2 - (df / 2 - 1) * math.log(2) - math.lgamma(df / 2)   # of u
    z = tc * u / math.sqrt(df) - lam
    tail = 0.5 * np.vectorize(math.erfc)(z / math.sqrt(2))
    return float(np.trapezoid(np.exp(log_pdf) * tail, u))


def mde(sd: float, n: int, alpha: float, target: float = TARGET) -> float:
    """The smallest effect past the threshold detected with power `target` at n seeds (bisection on power)."""
    if n < 2 or sd <= 0:
        return math.nan
    lo, hi = 0.0, sd
    while power(hi, sd, n, alpha) < target:
        lo, hi = hi, 2 * hi
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if power(mid, sd, n, alpha) < target else (lo, mid)
    return hi


def seeds_for(effect: float, sd: float, alpha: float, target: float = TARGET, most: int = MOST_SEEDS) -> int | None:
    """The fewest seeds whose power to detect `effect` reaches `target` (None: more than `most`, or no spread)."""
    return next((n for n in range(2, most + 1) if power(effect, sd, n, alpha) >= target), None)
