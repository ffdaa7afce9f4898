"""How the claims' t test fares under non-normal seed spreads as seeds grow, and how Johnson's (1978)
skewness-corrected t would (a candidate for the claims' test, not adopted; docs/findings_moved.md).

1. The lab's pipeline with the t test alone (reasonlab.stats.null.rate, a "beats" claim at its null, no placebo
   floor) at 5, 8, 16 and 32 seeds for each non-normal spread.
2. The bare one-sided test on standardised seed spreads (the null at 0), the t test against Johnson's
   t1 = sqrt(n) (m + mu3 / (6 s^2 n) + mu3 m^2 / (3 s^4)) / s, both against Student's 97.5 % quantile; and their
   power against a normal effect of 1.5 sd.

    python scripts/skewed_nulls.py [--labs 4000] [--draws 40000]
"""
import argparse
import math

import numpy as np

from reasonlab.stats import null
from reasonlab.stats.findings import t_quantile


def johnson(x: np.ndarray) -> np.ndarray:
    """Johnson's t1 per row of x (seeds in columns); where a row has no spread, its mean's sign times infinity, as
    Student's t gives it (the lab holds a claim whose seeds all agree past its threshold)."""
    n = x.shape[1]
    m, s = x.mean(1), x.std(1, ddof=1)
    mu3 = ((x - m[:, None]) ** 3).mean(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = math.sqrt(n) * (m + mu3 / (6 * s**2 * n) + mu3 * m**2 / (3 * s**4)) / s
        return np.where(s > 0, t1, np.where(m > 0, np.inf, -np.inf))


def student(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return x.mean(1) / (x.std(1, ddof=1) / math.sqrt(x.shape[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labs", type=int, default=4000, help="simulated labs per cell of part 1")
    ap.add_argument("--draws", type=int, default=40_000, help="samples per cell of part 2")
    args = ap.parse_args()
    print("1. the lab's 'beats' claim at its null, the t test alone: false holds by seeds")
    for shape in ("skewed", "bimodal", "censored"):
        cells = []
        for n in (5, 8, 16, 32):
            d = null.Design(seed_sd=0.02, shape=shape, seeds=n, placebo=False)
            r, se = null.rate("greater", args.labs, d, seed=1)
            cells.append(f"{n} seeds {r:.4f} (bound {null.ALPHA + 3 * se:.4f})")
        print(f"  {shape:<9} " + "; ".join(cells))
    print("2. the bare test on standardised spreads: false holds, t against Johnson's t1")
    rng = np.random.default_rng(0)
    for n in (5, 8):
        tc = t_quantile(1 - null.ALPHA, n - 1)
        for shape in ("normal", "skewed", "bimodal", "censored"):
            x = null.seed_spread(rng, (args.draws, n), shape)
            print(f"  {n} seeds, {shape:<9} t {np.mean(student(x) > tc):.4f}  Johnson {np.mean(johnson(x) > tc):.4f}")
        y = rng.normal(1.5, 1.0, (args.draws, n))
        print(f"  {n} seeds, power at 1.5 sd: t {np.mean(student(y) > tc):.3f}  Johnson {np.mean(johnson(y) > tc):.3f}")


if __name__ == "__main__":
    main()
