"""Findings are computed from the results: each check holds on hand-made results where it must, fails where it must
not, and is inconclusive where the interval straddles its threshold."""
import math
import re

import numpy as np
import pytest

from reasonlab.stats import findings


def test_verdicts_read_off_the_interval():
    assert findings.greater((0.1, 0.3), 0.0) == findings.HOLDS and findings.greater((-0.3, 0.0), 0.0) == findings.FAILS
    assert findings.greater((-0.1, 0.3), 0.0) == findings.UNSURE
    assert findings.at_most((-0.2, 0.04), 0.05) == findings.HOLDS and findings.at_most((0.06, 0.2), 0.05) == findings.FAILS
    assert findings.both(findings.HOLDS, findings.HOLDS) == findings.HOLDS and findings.both(findings.HOLDS, findings.UNSURE) == findings.UNSURE
    assert findings.both(findings.UNSURE, findings.FAILS) == findings.FAILS


def test_seed_interval_is_students_t():
    m, (lo, hi) = findings.seed_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and hi - m == pytest.approx(4.303 / np.sqrt(3), rel=1e-4)
    assert findings.seed_interval([5.0])[1] == (-np.inf, np.inf)            # one seed: no interval, so never "holds"
    assert findings.seed_check("x", "c", "s", [0.5], 0.0)["verdict"] == findings.UNSURE


def test_moments_are_numpys_mean_and_std_bit_for_bit():
    """The verdicts read the same bits as numpy's mean and std(ddof=1) would give: committed findings stay equal
    (up to 7 values summed in Python, more by numpy: many draws either side of the switch)."""
    rng = np.random.default_rng(0)
    for n in range(2, 25):
        for scale in (1e-6, 1.0, 1e3):
            for _ in range(40 if n < 12 else 2):
                x = list(rng.normal(0.3, scale, n))
                assert findings.moments(x) == (n, float(np.mean(x)), float(np.std(x, ddof=1))), (n, scale, x)
    for x in ([1, 0, 1, 1, 0], list(np.float32([0.1, 0.7, 0.3])), np.array([0.2, 0.25, 0.9])):   # read as float64
        y = np.asarray(x, dtype=float)
        assert findings.moments(x) == (len(x), float(np.mean(y)), float(np.std(y, ddof=1))), x
    assert findings.moments([0.5])[:2] == (1, 0.5)


def test_t_distribution_is_exact():
    for df, q975 in ((1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (9, 2.262), (30, 2.042)):
        assert findings.t_cdf(q975, df) == pytest.approx(0.975, abs=2e-5) and findings.t_quantile(0.975, df) == pytest.approx(q975, abs=1e-3)
        assert findings.t_cdf(0.0, df) == pytest.approx(0.5) and findings.t_cdf(-q975, df) == pytest.approx(0.025, abs=2e-5)


@pytest.mark.parametrize("seeds", [3, 5])
@pytest.mark.parametrize("seed_sd", [0.02, 0.04])
def test_false_holds_under_a_true_null_stay_at_the_nominal_rate(seeds, seed_sd):
    """20,000 simulated labs where the true effect is 0: each seed's statistic is a seed-level shift (sd seed_sd)
    plus the mean over 700 problems of a paired 0/1 difference. The share of "holds" must stay within 2.5 % + 3 Monte
    Carlo standard errors (the two-level bootstrap this replaced said "holds" 7-10 % of the time at 3 seeds)."""
    rng = np.random.default_rng(seeds * 100 + int(seed_sd * 1000))
    labs, problems = 20_000, 700
    a = rng.random((labs, seeds, problems)) < 0.7
    b = rng.random((labs, seeds, problems)) < 0.7
    stats = (a.mean(2) - b.mean(2)) + rng.normal(0, seed_sd, (labs, seeds))
    holds = np.mean([findings.seed_check("null", "c", "s", list(x), 0.0)["verdict"] == findings.HOLDS for x in stats])
    se = np.sqrt(0.025 * 0.975 / labs)
    assert holds <= 0.025 + 3 * se
    assert holds >= 0.025 - 3 * se              # and the test is not conservative to the point of uselessness


def test_holm_keeps_the_family_wise_rate_over_primaries():
    """Eight primary claims, all true nulls, 4,000 labs: Holm's family-wise false-holds rate stays at most 2.5 % (+3
    MC SE), where holding any of eight unadjusted would be about 18 %."""
    rng = np.random.default_rng(7)
    any_raw = any_holm = 0
    for _ in range(4000):
        fs = [dict(findings.seed_check("n", f"c{i}", "s", list(rng.normal(0, 0.03, 5)), 0.0), primary=True) for i in range(8)]
        any_raw += any(f["verdict"] == findings.HOLDS for f in fs)
        any_holm += any(f["verdict"] == findings.HOLDS for f in findings.holm(fs))
    se = np.sqrt(0.025 * 0.975 / 4000)
    assert any_holm / 4000 <= 0.025 + 3 * se < 0.1 < any_raw / 4000


def test_holm_step_down_on_known_p_values():
    fs = [{"claim": str(i), "verdict": findings.HOLDS, "p": p, "primary": True} for i, p in enumerate([0.001, 0.012, 0.02])]
    fs.append({"claim": "secondary", "verdict": findings.HOLDS, "p": 0.02, "primary": False})
    out = findings.holm(fs)
    # 0.001 <= 0.025/3, 0.012 <= 0.025/2, 0.02 <= 0.025: all three survive; the secondary is untouched
    assert [f["verdict"] for f in out] == [findings.HOLDS] * 4 and [f.get("p_holm") for f in out[:3]] == [0.003, 0.024, 0.024]
    fs[1]["p"] = 0.013                           # 0.013 > 0.0125: it and every later one stop holding
    assert [f["verdict"] for f in findings.holm(fs)] == [findings.HOLDS, findings.UNSURE, findings.UNSURE, findings.HOLDS]


def test_holm_counts_the_declared_family_not_only_the_primaries_with_a_p_value():
    fs = [{"claim": str(i), "verdict": findings.HOLDS, "p": p, "primary": True} for i, p in enumerate([0.001, 0.012])]
    assert [f["verdict"] for f in findings.holm(fs)] == [findings.HOLDS] * 2
    # declared: four primaries (two untestable, no p): 0.012 > 0.025 / 3 no longer survives
    assert [f["verdict"] for f in findings.holm(fs, family=4)] == [findings.HOLDS, findings.UNSURE]
    assert findings.holm(fs, family=4)[0]["p_holm"] == 0.004
    assert [f["verdict"] for f in findings.holm(fs, family=1)] == [findings.HOLDS] * 2    # never fewer than asked


def prim(exp, task, verdict, value=0.5, control=None):
    return {"experiment": exp, "task": task, "claim": f"{exp} works", "verdict": verdict, "value": value,
            "ci95": [value - 0.1, value + 0.1], "kind": findings.PRIMARY, **({"control": control} if control else {})}


def test_a_lesson_replicates_where_its_primary_holds_on_two_tasks():
    fs = [prim("a", "digits", findings.HOLDS), prim("a", "add", findings.HOLDS), prim("b", "digits", findings.HOLDS),
          prim("b", "add", findings.UNSURE), prim("c", "digits", findings.FAILS),
          {"experiment": "c", "task": "add", "claim": "side", "verdict": findings.HOLDS, "kind": findings.SECONDARY}]
    assert findings.held_on(fs) == {"a": ["digits", "add"], "b": ["digits"], "c": []}
    rows = findings.by_task(fs)
    assert rows[0] == "| experiment | primary claim | digits | add | holds on |"
    assert rows[2].endswith("| replicates (digits, add) |") and rows[3].endswith("| digits only |")
    assert "| 0.500 [0.400, 0.600]: **inconclusive** |" in rows[3]
    assert rows[4].endswith("| not run | holds on no task |")     # c's primary was not asked on add (a secondary was)


def test_untestable_when_the_arms_cannot_reach_the_threshold_or_nothing_varies():
    ceiling = findings.seed_check("x", "c", "s", [0.01, 0.0, 0.02], 0.05, room=0.03)         # the arms allow 0.03 at most
    assert ceiling["verdict"] == findings.UNTESTABLE and "at best" in ceiling["untestable"]
    floor = findings.seed_check("x", "c", "s", [0.4, 0.5, 0.45], 0.1, test=findings.at_most, room=0.3)
    assert floor["verdict"] == findings.UNTESTABLE and "at best" in floor["untestable"]
    # both arms at accuracy 1: "A loses to or ties B" (A - B <= 0.02) cannot fail
    tie = findings.seed_check("x", "c", "s", [0.0] * 5, 0.02, test=findings.at_most, room=(-1.0, 0.0))
    assert tie["verdict"] == findings.UNTESTABLE and "cannot fail" in tie["untestable"]
    assert findings.seed_check("x", "c", "s", [0.0, 0.01, -0.01], 0.0, room=(-1.0, 0.0))["verdict"] == findings.UNTESTABLE
    assert findings.seed_check("x", "c", "s", [0.14, 0.16, 0.15], 0.05, room=0.5)["verdict"] == findings.HOLDS
    fixed = findings.seed_check("x", "c", "s", [1.04] * 5, 1.0, untestable="no variance by construction")
    assert fixed["verdict"] == findings.UNTESTABLE
    assert findings.both(findings.HOLDS, findings.UNTESTABLE) == findings.UNTESTABLE


def test_float_noise_never_decides_a_verdict():
    assert findings.seed_check("x", "c", "s", [7e-15, 1e-16, 3e-15], 0.0)["verdict"] == findings.FAILS
    assert findings.greater((1e-12, 0.2), 0.0) == findings.UNSURE and findings.at_most((-0.1, 1e-12), 0.0) == findings.HOLDS


def test_the_findings_table_prints_every_claim_with_its_verdict():
    fs = [findings.seed_check("x", "Chains beat direct answers", "gap", [0.8, 0.85, 0.9], 0.0),
          findings.missing("s", "a claim", "no data")]
    t = findings.table(fs)
    assert "Chains beat direct answers" in t and "**holds**" in t and "a claim" in t and "**inconclusive**" in t
    assert findings.verdict_line(fs[0]).startswith("**Holds** on this run: chains beat")


def test_a_verdict_line_keeps_an_acronym_that_opens_the_claim():
    f = findings.seed_check("x", "RL solves problems the start never samples", "share", [0.1, 0.12, 0.11], 0.0)
    assert "on this run: RL solves" in findings.verdict_line(f)
    f = findings.seed_check("x", "L1-Max reads its budget", "spread", [1.1, 1.2, 1.3], 0.0)
    assert "on this run: L1-Max reads" in findings.verdict_line(f)
    f = findings.seed_check("x", "Chains beat direct answers", "gain", [0.1, 0.12, 0.11], 0.0)
    assert "on this run: chains beat" in findings.verdict_line(f)


def test_a_claim_is_untestable_where_a_premise_it_rests_on_does_not_hold():
    ok = findings.premise(findings.seed_check("x", "chains beat A", "gap", [0.5, 0.6, 0.7], 0.0), "chains")
    bad = findings.premise(findings.seed_check("x", "the start leaves room", "room", [-0.30, -0.31, -0.29], 0.0), "room")
    rests_on_room = {**findings.seed_check("x", "a", "s", [1.0, 1.1, 1.2], 0.0), "requires": ["room"]}
    rests_on_chains = {**findings.seed_check("x", "b", "s", [1.0, 1.1, 1.2], 0.0), "requires": ["chains"]}
    on_all = findings.primary(findings.seed_check("x", "c", "s", [1.0, 1.1, 1.2], 0.0))
    out = findings.gate([ok, bad, rests_on_room, rests_on_chains, on_all])
    assert [f["verdict"] for f in out] == [findings.HOLDS, findings.FAILS, findings.UNTESTABLE, findings.HOLDS,
                                           findings.UNTESTABLE]
    assert "the start leaves room" in out[2]["untestable"] and out[2]["ungated"] == findings.HOLDS
    assert findings.counts(out)[findings.FAILS] == 0            # a premise is not a finding
    assert findings.gate([ok, rests_on_chains]) == [ok, rests_on_chains]
    # the gate shows what it hides: the claim's own verdict before gating, in the table and in the sentence
    assert "before gating: holds" in findings.table(out).splitlines()[4]
    assert "before gating: holds" in findings.verdict_line(out[2]) and "before gating" not in findings.table([ok])


def test_the_room_rule_compares_the_designs_range_with_the_claims_own_threshold():
    assert findings.out_of_room((-1.0, 1.0), 0.0) is None
    assert "cannot pass" in findings.out_of_room((-1.0, 0.0), 0.0)          # the best it can do is the threshold
    assert "cannot fail" in findings.out_of_room((0.2, 1.0), 0.1)
    assert findings.out_of_room((0.0, 0.3), 0.05, "<=") is None
    assert "cannot fail" in findings.out_of_room((0.0, 0.05), 0.05, "<=")
    f = findings.primary(findings.seed_check("x", "c", "s", [0.5, 0.6, 0.7], 0.05))
    assert findings.with_room(f, (-1.0, 1.0))["verdict"] == findings.HOLDS
    g = findings.with_room(f, (-1.0, 0.05))
    assert g["verdict"] == findings.UNTESTABLE and g["room"] == [-1.0, 0.05] and g["ungated"] == findings.HOLDS
    both = dict(f, threshold="> 0.05 (and tokens saved > 0)")             # a compound claim: its statistic's clause
    assert findings.with_room(both, (-1.0, 1.0))["room"] == [-1.0, 1.0]
    assert findings.with_room(both, (-1.0, 0.05))["verdict"] == findings.UNTESTABLE


def test_a_missing_primary_keeps_its_verdict_under_the_room_rule():
    f = findings.primary(findings.missing("x", "a claim", "needs two arms"))
    assert findings.with_room(f, (-1.0, 1.0)) == f


def test_a_claim_with_nothing_to_read_is_untestable_with_its_threshold_and_source():
    th = findings.Threshold(0.5, "a practical margin")
    f = findings.unread("x", "a claim", "a statistic", th, "no such problems", control="c")
    assert (f["verdict"], f["untestable"], f["threshold"], f["source"], f["control"]) == (
        findings.UNTESTABLE, "no such problems", "> 0.5", "a practical margin", "c")
    assert f["value"] is None and f["per_seed"] == [] and "source" not in findings.unread("x", "c", "s", 0.0, "why")


def test_a_claims_pipes_cannot_break_a_table():
    from reasonlab.io.report import md_table
    f = findings.seed_check("kl", "k3 is off the gradient of KL(pi || pi_ref)", "|a - b|", [0.2, 0.3, 0.25], 0.1)
    for text in (findings.table([f]), md_table(["claim", "value"], [[f["claim"], "1 | 2"]])):
        widths = {len(re.findall(r"(?<!\\)\|", row)) for row in text.splitlines()}
        assert len(widths) == 1, text                        # every row has the header's number of cells


def test_a_primary_is_floored_by_its_placebos_spread():
    """Five seeds in one mode (no spread of their own) hold alone; with the placebo's spread as a floor they do not,
    and p is the larger of the two tests' p values (Holm sees the same rule). A placebo with no spread, or none,
    leaves the claim as it was; a wide own spread keeps its own verdict."""
    f = findings.primary(findings.seed_check("s", "c", "x", [0.1, 0.1, 0.1, 0.1, 0.1], 0.0))
    assert f["verdict"] == findings.HOLDS and f["p"] == 0.0
    pilot = [0.2, -0.2, 0.1, -0.15, 0.05]
    g = findings.floored(f, pilot)
    s = float(np.std(pilot, ddof=1))
    t = 0.1 / (s / math.sqrt(5))
    assert g["verdict"] == findings.UNSURE and "placebo's spread" in g["floored"]
    assert g["p"] == pytest.approx(1 - findings.t_cdf(t, 8)) and g["floor"]["df"] == 8
    assert g["floor"]["ci95"][0] == pytest.approx(0.1 - findings.t_quantile(0.975, 8) * s / math.sqrt(5), abs=1e-4)
    assert findings.floored(f, [0.0] * 5) == f and findings.floored(f, None) == f and findings.floored(f, [0.3]) == f
    strong = findings.primary(findings.seed_check("s", "c", "x", [1.0, 1.2, 0.9, 1.1, 1.05], 0.0))
    assert findings.floored(strong, pilot)["verdict"] == findings.HOLDS
    assert findings.floored(strong, pilot)["p"] == pytest.approx(max(strong["p"], findings.floored(strong, pilot)["floor"]["p"]))
    gated = findings.gate([findings.premise(findings.seed_check("s", "p", "x", [0.0] * 5, 1.0)), f])[1]
    g = findings.floored(gated, pilot)
    assert g["verdict"] == findings.UNTESTABLE and g["ungated"] == findings.UNSURE
    assert "placebo's spread" in findings.table([g])


def test_a_floored_primary_at_most_and_a_missing_one():
    f = findings.primary(findings.seed_check("s", "c", "x", [0.0] * 5, 0.05, test=findings.at_most))
    assert f["verdict"] == findings.HOLDS
    assert findings.floored(f, [0.2, -0.2, 0.1, -0.15, 0.05])["verdict"] == findings.UNSURE
    m = findings.primary(findings.missing("s", "c", "no evidence"))
    assert findings.floored(m, [0.2, -0.2, 0.1]) == m
