"""Power by design: the quadrature replays a Monte-Carlo run of the lab's own t test (the p of findings.seed_check,
fed normal seeds) and of the test floored by a placebo's spread (findings.floored), and the lab's primary table reads it
from the placebo's spread."""
import math

import numpy as np
import pytest

from reasonlab.runner import lab, pilot
from reasonlab.stats import findings
from reasonlab.stats.power import MOST_SEEDS, TARGET, mde, power, seeds_for


def simulated_power(effect, sd, n, alpha, labs=200_000, seed=0):
    """The share of simulated labs whose one-sided t test holds: n normal seeds, mean threshold + effect."""
    x = np.random.default_rng(seed).normal(effect, sd, (labs, n))
    t = x.mean(1) / (x.std(1, ddof=1) / math.sqrt(n))
    rate = float((t > findings.t_quantile(1 - alpha, n - 1)).mean())
    return rate, math.sqrt(rate * (1 - rate) / labs)


@pytest.mark.parametrize("effect,sd,n,alpha", [(0.0, 1.0, 5, 0.025), (1.0, 1.0, 5, 0.025), (0.05, 0.03, 5, 0.025 / 13),
                                               (2.0, 1.0, 2, 0.01), (0.3, 0.5, 12, 0.025 / 13)])
def test_power_replays_the_t_test(effect, sd, n, alpha):
    rate, se = simulated_power(effect, sd, n, alpha)
    assert abs(power(effect, sd, n, alpha) - rate) <= 4 * se + 1e-4


def simulated_floored_power(effect, sd, n, pilot, alpha, labs=200_000, seed=0):
    """The share of simulated labs whose primary holds by the rule of findings.floored: its own t test and the
    interval with the larger of its and its placebo's sd on n - 1 + pilot - 1 degrees of freedom; the vectorised rule
    is checked against findings.floored itself on the first labs."""
    rng = np.random.default_rng(seed)
    x, y = rng.normal(effect, sd, (labs, n)), rng.normal(0.0, sd, (labs, pilot))
    m, s1, s2 = x.mean(1), x.std(1, ddof=1), y.std(1, ddof=1)
    own = m > findings.t_quantile(1 - alpha, n - 1) * s1 / math.sqrt(n)
    held = own & (m > findings.t_quantile(1 - alpha, n + pilot - 2) * np.maximum(s1, s2) / math.sqrt(n))
    for i in range(300):
        f = findings.primary(findings.seed_check("s", "c", "x", list(x[i]), 0.0))
        g = findings.floored(f, list(y[i]))
        assert (g["p"] <= alpha) == held[i] or abs(g["p"] - alpha) < 1e-9
    rate = float(held.mean())
    return rate, math.sqrt(rate * (1 - rate) / labs)


@pytest.mark.parametrize("effect,sd,n,pilot,alpha", [(0.0, 1.0, 5, 5, 0.025), (1.5, 1.0, 5, 5, 0.025),
                                                     (0.05, 0.03, 5, 5, 0.025 / 52), (0.3, 0.5, 12, 8, 0.025 / 13)])
def test_floored_power_replays_the_labs_rule(effect, sd, n, pilot, alpha):
    rate, se = simulated_floored_power(effect, sd, n, pilot, alpha)
    assert abs(power(effect, sd, n, alpha, pilot) - rate) <= 4 * se + 1e-4
    assert power(effect, sd, n, alpha, pilot) <= power(effect, sd, n, alpha) + 1e-9     # the floor only costs power


def test_the_mde_is_detected_with_the_target_power_and_seeds_for_is_the_fewest():
    alpha = 0.025 / 13
    d = mde(0.1, 5, alpha)
    assert power(d, 0.1, 5, alpha) == pytest.approx(TARGET, abs=1e-6) and power(0.9 * d, 0.1, 5, alpha) < TARGET
    n = seeds_for(0.05, 0.1, alpha)
    assert power(0.05, 0.1, n, alpha) >= TARGET > power(0.05, 0.1, n - 1, alpha)
    assert seeds_for(0.001, 1.0, alpha) is None and MOST_SEEDS >= 32
    n = seeds_for(0.1, 0.1, alpha, pilot=5)                  # the placebo stays at its five seeds
    assert power(0.1, 0.1, n, alpha, 5) >= TARGET > power(0.1, 0.1, n - 1, alpha, 5)
    assert n > seeds_for(0.1, 0.1, alpha)                    # the floor costs seeds
    assert mde(0.1, 5, alpha, pilot=5) > d
    assert math.isnan(power(1.0, 0.0, 5, alpha)) and math.isnan(mde(1.0, 1, alpha))


def test_the_primary_table_shows_power_from_the_placebos_spread_and_says_underpowered():
    prim = {"experiment": "entropy", "task": "digits", "section": "entropy", "claim": "c", "primary": True,
            "per_seed": [0.1, 0.0, 0.2, -0.1, 0.15], "value": 0.07, "ci95": [-0.1, 0.2], "p": 0.1,
            "verdict": findings.UNSURE, "threshold": "> 0"}
    wide = {"experiment": "entropy", "per_seed": [0.3, -0.2, 0.1, -0.3, 0.2], "value": 0.02, "ci95": [-0.3, 0.3],
            "verdict": findings.UNSURE}
    d = pilot.design_power(prim, wide, 1)
    assert d["sd"] == pytest.approx(np.std(wide["per_seed"], ddof=1)) and d["power"] < TARGET
    assert d["power"] == pytest.approx(power(0.1, d["sd"], 5, 0.025, pilot=5))
    assert d["power"] < power(0.1, d["sd"], 5, 0.025)                    # the floor costs power
    table = lab.primaries_table([prim], ["entropy"], {"entropy": wide}, 1)
    assert "inconclusive** (underpowered)" in table and f"MDE {d['mde']:.3f}" in table
    flat = dict(wide, per_seed=[0.0] * 5)
    assert pilot.design_power(prim, flat, 1) is None and "no pilot spread" in lab.primaries_table(
        [prim], ["entropy"], {"entropy": flat}, 1)
    assert pilot.power_cell(pilot.design_power(prim, wide, 52)) != pilot.power_cell(d)    # Holm's level: the family's


def test_the_primary_table_shows_the_negative_control_measured_or_declared():
    """A negative control measured on the run (the primary's detail) is judged as the primary is and shown with its
    interval; else the experiment's declared one (or its placebo where that is inert by design); else a dash."""
    neg = findings.negative("pure sharpening", "s", [0.6, 0.5, 0.7, 0.65, 0.55], findings.Threshold(0.05, "x"))
    assert neg["verdict"] == findings.HOLDS and neg["threshold"] == "> 0.05" and neg["value"] == pytest.approx(0.6)
    prim = {"experiment": "passk", "claim": "c", "primary": True, "negative": neg}
    assert lab.negative_cell(prim) == f"pure sharpening: {lab._interval(neg)}: holds" and "0.600 [" in lab._interval(neg)
    assert "not the treatment's alone" in lab.negative_cell(dict(prim, verdict=findings.HOLDS))
    assert lab.negative_cell({"experiment": "budgets"}) == lab.X.get("budgets").negative != ""
    assert lab.negative_cell({"experiment": "faithful"}) == lab.X.get("faithful").negative != ""
    assert lab.negative_cell({"experiment": "rl"}) == "—"
