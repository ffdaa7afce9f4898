"""The whole verdict pipeline under the null (reasonlab.stats.null): with problems drawn per seed, a claim whose
effect sits exactly at its threshold holds at most 2.5 % of the time (+ 3 Monte-Carlo standard errors), for every
kind of claim the lab states and for Holm over the lab's primaries, with or without a placebo's spread as the
primaries' floor; with one draw shared by the seeds (the lab's old design) it does not, nor does the t test alone
when the seed-to-seed spread is skewed, bimodal or censored; the floor mends the bimodal and censored nulls."""
import numpy as np
import pytest

from reasonlab import experiments as X
from reasonlab import tasks
from reasonlab.stats import null
from reasonlab.stats.findings import ALPHA


@pytest.mark.parametrize("placebo", [True, False])
@pytest.mark.parametrize("seed_sd", [0.005, 0.02])
@pytest.mark.parametrize("case", list(null.CASES))
def test_a_claim_at_its_null_holds_at_most_at_the_nominal_rate(case, seed_sd, placebo):
    r, se = null.rate(case, 2_000, null.Design(seed_sd=seed_sd, placebo=placebo), seed=1)
    assert r <= ALPHA + 3 * se, (case, seed_sd, r, se)


@pytest.mark.parametrize("placebo", [True, False])
@pytest.mark.parametrize("seed_sd", [0.005, 0.02])
def test_holm_keeps_the_familywise_rate_of_the_labs_primaries(seed_sd, placebo):
    """The family the committed lab declares: every experiment with a primary (the registry's) on every task."""
    primaries = sum(1 for n in X.BUILTIN if X.get(n).placebo is not None) * len(tasks.BUILTIN)
    assert primaries == 52
    r, se = null.familywise(2_000, primaries, design=null.Design(seed_sd=seed_sd, placebo=placebo), seed=1)
    assert r <= ALPHA + 3 * se, (seed_sd, r, se)


@pytest.mark.parametrize("shape", ["skewed", "bimodal", "censored"])
def test_a_skewed_bimodal_or_censored_seed_spread_breaks_the_t_test_alone_at_five_seeds(shape):
    """Without a placebo beside it (the t test alone) a null whose seeds are mostly a little above the threshold and
    sometimes far below (a long left tail; two seeds in five that fail; a normal cut at one sd above, as rl's steps
    at the run's length) "holds" more often than 2.5 % at 5 seeds: five seeds cannot see a tail they did not draw
    (0.6^5 = 7.8 % of labs draw no failing seed). More seeds mend the bimodal null, not the skewed one (rates by seed
    count: docs/findings_moved.md)."""
    labs = 8_000 if shape == "censored" else 2_000
    d = null.Design(seed_sd=0.02, shape=shape, placebo=False)
    r, se = null.rate("greater", labs, d, seed=3 if shape == "censored" else 1)
    assert r > ALPHA + 3 * se, (shape, r, se)
    if shape != "censored":                # more seeds mend the bimodal null, not the skewed one
        r8, _ = null.rate("greater", labs, null.Design(seed_sd=0.02, shape=shape, seeds=8, placebo=False), seed=1)
        assert (r8 < r) == (shape == "bimodal"), (shape, r, r8)
    with pytest.raises(ValueError, match="unknown shape"):
        null.Design(shape="uniform") and null.seed_spread(None, (1, 1), "uniform")


@pytest.mark.parametrize("shape", ["bimodal", "censored", "skewed"])
def test_the_placebos_spread_as_a_floor_mends_the_bimodal_and_censored_nulls_not_the_skewed(shape):
    """The lab's test beside a placebo lab (findings.floored): a placebo drawn like the seeds gives a spread the five
    seeds may have missed. Bimodal and censored nulls keep the level for every primary kind; a tail as rare as the
    skewed null's (skewness about -6) is missed by the placebo's five seeds too: a known limit, measured."""
    for case in ("greater", "room", "gated"):
        r, se = null.rate(case, 4_000, null.Design(seed_sd=0.02, shape=shape), seed=2)
        assert (r <= ALPHA + 3 * se) == (shape != "skewed"), (shape, case, r, se)


def test_every_shape_has_mean_0_and_sd_1():
    rng = np.random.default_rng(0)
    for shape in ("normal", "skewed", "bimodal", "censored"):
        x = null.seed_spread(rng, (400_000, 1), shape)
        assert abs(x.mean()) < 0.01 and abs(x.std() - 1) < 0.02, shape


def test_problems_shared_by_the_seeds_break_the_interval():
    """The simulation can fail: scored on one shared draw, a null effect 'holds' far more often than 2.5 %."""
    r, se = null.rate("greater", 2_000, null.Design(seed_sd=0.005, shared=True), seed=1)
    assert r > ALPHA + 3 * se and r > 0.08


@pytest.mark.slow
@pytest.mark.parametrize("seed_sd", [0.005, 0.02])
def test_twenty_thousand_labs_per_case(seed_sd):
    d = null.Design(seed_sd=seed_sd)
    for case in null.CASES:
        r, se = null.rate(case, 20_000, d, seed=2)
        assert r <= ALPHA + 3 * se, (case, r, se)
    r, se = null.familywise(20_000, design=d, seed=2)
    assert r <= ALPHA + 3 * se, ("holm", r, se)
