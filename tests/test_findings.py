"""Findings are computed from the results: each check holds on hand-made results where it must, fails where it must
not, and is inconclusive where the interval straddles its threshold."""
import numpy as np
import pytest

from reasonlab.stats import findings as F
from reasonlab.experiments import adaptive, base, budgets, rl, sampling, star


def test_verdicts_read_off_the_interval():
    assert F.greater((0.1, 0.3), 0.0) == F.HOLDS and F.greater((-0.3, 0.0), 0.0) == F.FAILS
    assert F.greater((-0.1, 0.3), 0.0) == F.UNSURE
    assert F.at_most((-0.2, 0.04), 0.05) == F.HOLDS and F.at_most((0.06, 0.2), 0.05) == F.FAILS
    assert F.both(F.HOLDS, F.HOLDS) == F.HOLDS and F.both(F.HOLDS, F.UNSURE) == F.UNSURE
    assert F.both(F.UNSURE, F.FAILS) == F.FAILS


def test_seed_interval_is_students_t():
    m, (lo, hi) = F.seed_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and hi - m == pytest.approx(4.303 / np.sqrt(3))
    assert F.seed_interval([5.0])[1] == (-np.inf, np.inf)            # one seed: no interval, so never "holds"
    assert F.seed_check("x", "c", "s", [0.5], 0.0)["verdict"] == F.UNSURE


def test_hier_bootstrap_interval_contains_the_mean_and_shrinks_with_problems():
    rng = np.random.default_rng(0)
    small = [((rng.random(20) < 0.7).astype(float),) for _ in range(3)]
    large = [((rng.random(2000) < 0.7).astype(float),) for _ in range(3)]
    m, ci, per = F.hier_bootstrap(large, np.mean)
    assert ci[0] < m < ci[1] and len(per) == 3 and abs(m - 0.7) < 0.05
    assert ci[1] - ci[0] < F.hier_bootstrap(small, np.mean)[1][1] - F.hier_bootstrap(small, np.mean)[1][0]


def base_result(gap):
    """One seed of the base experiment: forced A right at k = 2 only, forced S right with `gap` more at k >= 3."""
    a = {k: (1.0 if k == 2 else 0.1) for k in range(2, 9)}
    return {"A": {"acc_by_k": a}, "S": {"acc_by_k": {k: min(1.0, a[k] + (0 if k == 2 else gap)) for k in a}}}


def test_chains_beat_direct_holds_fails_and_is_unsure():
    assert base.chains_beat_direct([base_result(g) for g in (0.8, 0.85, 0.9)])["verdict"] == F.HOLDS
    assert base.chains_beat_direct([base_result(g) for g in (-0.2, -0.3, -0.25)])["verdict"] == F.FAILS
    assert base.chains_beat_direct([base_result(g) for g in (0.3, -0.3, 0.01)])["verdict"] == F.UNSURE


def sampling_result(greedy, maj, ratio=1.0):
    return {"n_max": 8, "curves": {"A": {"greedy": {"acc": greedy}, "maj": {8: {"acc": maj}}}},
            "frontier": {"targets": [{"target": 0.9, "reachable": True, "ratio": ratio,
                                      "fixed": {"strategy": "S/greedy@1"}, "adaptive": {"per_k": {}}}]}}


def test_voting_cannot_rescue_direct_answers():
    assert sampling.voting_cannot_rescue_direct([sampling_result(0.3, 0.3 + d) for d in (0.0, -0.01, 0.01)])["verdict"] == F.HOLDS
    assert sampling.voting_cannot_rescue_direct([sampling_result(0.3, 0.6 + d) for d in (0.0, -0.01, 0.01)])["verdict"] == F.FAILS


def test_frontier_gain_reports_the_ratio_whatever_it_is():
    f = sampling.frontier_gain([sampling_result(0, 0, r) for r in (1.0, 1.0, 1.0)])
    assert f["value"] == 1.0 and f["verdict"] == F.FAILS             # one strategy best everywhere: no gain
    assert sampling.frontier_gain([sampling_result(0, 0, r) for r in (1.3, 1.25, 1.35)])["verdict"] == F.HOLDS
    none = [{"n_max": 8, "frontier": {"targets": [{"target": 0.9, "reachable": False}]}}]
    assert sampling.frontier_gain(none)["verdict"] == F.UNSURE and sampling.frontier_gain(none)["value"] is None


def budget_rows(acc0, acc8, tok0, tok8):
    return {"budgets": [{"format": "T", "kind": "max", "budget": 0, "acc": acc0, "tokens": tok0},
                        {"format": "T", "kind": "max", "budget": 8, "acc": acc8, "tokens": tok8}]}


def test_budget_forcing_needs_both_accuracy_and_tokens_to_rise():
    up = [budget_rows(0.2, 0.99 - e, 4.0, 10.0 + e) for e in (0.0, 0.01, 0.02)]
    assert budgets.budget_trades_accuracy_for_tokens(up)["verdict"] == F.HOLDS
    flat_tokens = [budget_rows(0.2, 0.99, 8.0 + e, 7.0) for e in (0.0, 0.1, 0.2)]   # tokens fall: not a trade
    assert budgets.budget_trades_accuracy_for_tokens(flat_tokens)["verdict"] == F.FAILS


def star_result(start, end, chain_end=None):
    r = {"main": [{"free": start}, {"free": end, "false_positive_rate": 0.01}]}
    if chain_end is not None:
        r["chain"] = [{"free": start}, {"free": chain_end}]
    return r


def test_star_checks():
    assert star.star_raises_free_accuracy([star_result(0.3, 0.9 + e) for e in (0, 0.01, 0.02)])["verdict"] == F.HOLDS
    assert star.star_raises_free_accuracy([star_result(0.3, 0.2 + e) for e in (0, 0.01, 0.02)])["verdict"] == F.FAILS
    same = [star_result(0.3, 0.9, 0.9 + e) for e in (-0.01, 0.0, 0.01)]          # the filters do not separate
    assert star.chain_filter_vs_answer_filter(same)["verdict"] == F.UNSURE
    assert star.chain_filter_vs_answer_filter([star_result(0.3, 0.9)])["verdict"] == F.UNSURE   # no chain run


def rl_result(grpo, reinforce, baseline):
    run = lambda s: {"solved": {"step": s} if s else None, "steps": 60}   # noqa: E731
    return {"grpo": run(grpo), "reinforce": run(reinforce), "reinforce_baseline": run(baseline)}


def test_rl_checks_count_unsolved_runs_at_their_length():
    rs = [rl_result(12, 45, 20), rl_result(10, None, 18), rl_result(14, 50, 25)]
    assert rl.rl_faster(rs, "grpo", "reinforce", "c")["per_seed"] == [33, 50, 36]    # None -> 60 steps
    assert rl.rl_faster(rs, "grpo", "reinforce", "c")["verdict"] == F.HOLDS
    assert rl.rl_faster(rs, "reinforce", "grpo", "c")["verdict"] == F.FAILS
    assert rl.rl_faster([{"grpo": rl_result(1, 1, 1)["grpo"]}], "grpo", "reinforce", "c")["verdict"] == F.UNSURE


def adaptive_result(acc, tokens):
    return {"runs": [{"method": "m", "acc": acc, "tokens": tokens}], "fixed": {"S": {"acc": 1.0, "tokens": 6.7}}}


def test_adaptive_against_always_s():
    ok = [adaptive_result(1.0 - e, 6.3 + e) for e in (0.0, 0.001, 0.002)]
    assert adaptive.adaptive_vs_always_s(ok)[0]["verdict"] == F.HOLDS
    worse = [adaptive_result(0.9 - e, 6.3) for e in (0.0, 0.01, 0.02)]
    assert adaptive.adaptive_vs_always_s(worse)[0]["verdict"] == F.FAILS
    longer = [adaptive_result(1.0, 7.0 + e) for e in (0.0, 0.1, 0.2)]
    assert adaptive.adaptive_vs_always_s(longer)[0]["verdict"] == F.FAILS


def test_the_findings_table_prints_every_claim_with_its_verdict():
    fs = [base.chains_beat_direct([base_result(g) for g in (0.8, 0.85, 0.9)]), F.missing("s", "a claim", "no data")]
    t = F.table(fs)
    assert "Chains beat direct answers" in t and "**holds**" in t and "a claim" in t and "**inconclusive**" in t
    assert F.verdict_line(fs[0]).startswith("**Holds** on this run: chains beat")
