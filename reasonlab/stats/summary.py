"""Small summaries shared by the report and the experiments: mean ± std over seeds, a bootstrap interval over
problems, the Pareto front of (tokens, accuracy) points, and what guessing scores."""
from __future__ import annotations

import numpy as np


def mean_std(xs) -> tuple[float, float]:
    a = np.asarray(xs, dtype=float)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0


def pm(xs, f: str = "{:.3f}") -> str:
    """"mean ± std" of xs (std over seeds, ddof 1; 0 for one value)."""
    m, s = mean_std(xs)
    return f"{f.format(m)} ± {f.format(s)}"


def bootstrap_ci(x: np.ndarray, n_boot: int = 1000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile bootstrap interval of the mean over problems."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    m = x[idx].mean(1)
    return float(np.quantile(m, 0.025)), float(np.quantile(m, 0.975))


def pareto(points: list[tuple[float, float]]) -> list[int]:
    """Indices, by increasing tokens, of the (tokens, accuracy) points that no other point beats on both: fewer or
    equal tokens and higher accuracy (of equal points, the first)."""
    front, best = [], -np.inf
    for i in sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1])):
        if points[i][1] > best:
            front.append(i)
            best = points[i][1]
    return front


def chance(method: str, N: int, one: float) -> float:
    """Guessing, where one guess is right with probability `one` (`Task.chance(k)`): `one` for one answer, and
    1 - (1 - one)^N for pass@N (one of N independent guesses right)."""
    return 1 - (1 - one) ** N if method in ("pass", "verified_pass") else one
