"""Power by design for a primary's one-sided t test over seeds (the p of findings.seed_check): the chance that it
holds when the true mean clears its threshold by `effect`, the smallest effect it detects with 80 % power, and the
seeds that would take.

The spread comes from a pilot kept apart from the verdict: the placebo lab (`reasonlab lab --placebo`), whose
treatment arm replicates the control on streams of its own, so that its per-seed spread is the spread of the
comparison under the null. The level is the first step of Holm's correction over the primaries (alpha / m): the
level the most significant primary must pass, which no later step makes easier, so the power is a lower bound.
"""
from __future__ import annotations

import math
from typing import Literal

import numpy as np

from .findings import t_quantile

TARGET = 0.8
"""the power a primary is designed for"""
MOST_SEEDS = 64
"""seeds_for looks no further"""


def _chi(df: int) -> tuple[np.ndarray, np.ndarray]:
    """A grid of a = sqrt(V / df), V chi-square on df (a sample sd over the true one), and the density of a on it."""
    u = np.linspace(1e-12, math.sqrt(df + 60 * math.sqrt(2 * df) + 60), 40_001)     # v = u^2: no pole at 0
    log_pdf = (df - 1) * np.log(u) - u * u / 2 - (df / 2 - 1) * math.log(2) - math.lgamma(df / 2)   # of u
    return u / math.sqrt(df), np.exp(log_pdf) * math.sqrt(df)


def _above(z: np.ndarray) -> np.ndarray:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * np.vectorize(math.erfc)(z / math.sqrt(2))


def power(effect: float, sd: float, n: int, alpha: float, pilot: int | None = None) -> float:
    """P(the one-sided t test at level alpha rejects "mean <= threshold") with n seeds whose values are normal with
    standard deviation sd and mean threshold + effect. Exact up to quadrature: T = (Z + lam) / a with a = sqrt(V / df),
    V chi-square on df = n - 1, so the power is E_a[P(Z > t_c a - lam)] (a noncentral t).

    pilot: the placebo's seeds, for the test the lab runs beside a placebo lab (findings.floored): it also needs
    Z + lam > t_p max(a, b), b the placebo's sd over sd (df_b = pilot - 1), t_p on df + df_b degrees of freedom.
    Both together: Z + lam > max(t_c a, t_p b), as t_c > t_p. Given a, the placebo splits at b* = t_c a / t_p: below
    it the own test decides, above it the floor; the inner integral over b is a running sum on b's grid."""
    if n < 2 or sd <= 0:
        return math.nan
    df, lam = n - 1, effect * math.sqrt(n) / sd
    tc = t_quantile(1 - alpha, df)
    a, pdf_a = _chi(df)
    own = _above(tc * a - lam)
    if pilot is None or pilot < 2:
        return float(np.trapezoid(pdf_a * own, a))
    tp = t_quantile(1 - alpha, df + pilot - 1)
    b, pdf_b = _chi(pilot - 1)
    steps = np.diff(b)
    cdf_b = np.concatenate([[0.0], np.cumsum((pdf_b[1:] + pdf_b[:-1]) / 2 * steps)])
    g = pdf_b * _above(tp * b - lam)
    beyond = np.concatenate([[0.0], np.cumsum((g[1:] + g[:-1]) / 2 * steps)])
    beyond = beyond[-1] - beyond                     # P(b > x and Z + lam > t_p b) at x = b's grid
    cut = tc * a / tp
    return float(np.trapezoid(pdf_a * (np.interp(cut, b, cdf_b) * own + np.interp(cut, b, beyond)), a))


def mde(sd: float, n: int, alpha: float, target: float = TARGET, pilot: int | None = None) -> float:
    """The smallest effect past the threshold detected with power `target` at n seeds (bisection on power)."""
    if n < 2 or sd <= 0:
        return math.nan
    lo, hi = 0.0, sd
    while power(hi, sd, n, alpha, pilot) < target:
        lo, hi = hi, 2 * hi
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if power(mid, sd, n, alpha, pilot) < target else (lo, mid)
    return hi


def seeds_for(effect: float, sd: float, alpha: float, target: float = TARGET, most: int = MOST_SEEDS,
              pilot: int | Literal["n"] | None = None) -> int | None:
    """The fewest seeds whose power to detect `effect` reaches `target` (None: more than `most`, or no spread);
    pilot: the seeds of the placebo whose spread floors the test, "n" where it runs at as many as the primary, None
    for the t test alone. Power grows with the seeds: a bisection."""
    enough = lambda n: power(effect, sd, n, alpha, n if pilot == "n" else pilot) >= target    # noqa: E731
    if sd <= 0 or not enough(most):
        return None
    lo, hi = 1, most                                 # not enough at lo (power at 1 seed: none), enough at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi
