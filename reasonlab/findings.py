"""Findings as computed checks: each lesson the lab states is a function of the results that returns the claim,
the statistic with its 95 % interval and per-seed values, the threshold, and a verdict (holds / does not hold /
inconclusive) read off the interval. The report prints the verdict beside the claim; no sentence asserts a
finding by itself.

Intervals: with per-problem scores, a two-level bootstrap (seeds drawn with replacement, then each seed's
problems), so both the seed-to-seed and the problem-to-problem spread count; with one number per seed, Student's
t interval over seeds (3 seeds: mean ± 4.30 s / sqrt 3, wide on purpose). One seed gives no interval over seeds:
such a check is inconclusive unless per-problem scores decide it.
"""
from __future__ import annotations

import math

import numpy as np

HOLDS, FAILS, UNSURE = "holds", "does not hold", "inconclusive"

# two-sided 95 % Student t quantiles by degrees of freedom (scipy.stats.t.ppf(0.975, df))
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def seed_interval(values) -> tuple[float, tuple[float, float]]:
    """Mean over seeds and its 95 % t interval ((-inf, inf) from one seed)."""
    x = np.asarray(values, dtype=float)
    m = float(x.mean())
    if len(x) < 2:
        return m, (-math.inf, math.inf)
    h = T975.get(len(x) - 1, 1.96) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return m, (m - h, m + h)


def hier_bootstrap(arrays: list[tuple[np.ndarray, ...]], stat, n_boot: int = 1000, seed: int = 0):
    """stat(*arrays of one seed) averaged over seeds, its 95 % two-level bootstrap interval (seeds with
    replacement, then each seed's problems with replacement; paired arrays keep their pairing), and the per-seed
    values."""
    rng = np.random.default_rng(seed)
    vals = [float(stat(*a)) for a in arrays]
    boots = np.empty(n_boot)
    for b in range(n_boot):
        tot = 0.0
        for s in rng.integers(0, len(arrays), len(arrays)):
            n = len(arrays[s][0])
            idx = rng.integers(0, n, n)
            tot += float(stat(*(x[idx] for x in arrays[s])))
        boots[b] = tot / len(arrays)
    return float(np.mean(vals)), (float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))), vals


def greater(ci, thr: float) -> str:
    """The statistic exceeds thr: holds when the whole interval is above it, fails when the whole interval is at or
    below it."""
    return HOLDS if ci[0] > thr else FAILS if ci[1] <= thr else UNSURE


def at_most(ci, thr: float) -> str:
    """The statistic is at most thr: holds when the whole interval is at or below it."""
    return HOLDS if ci[1] <= thr else FAILS if ci[0] > thr else UNSURE


def both(*verdicts: str) -> str:
    """Every part must hold; any part that fails fails the claim."""
    return FAILS if FAILS in verdicts else HOLDS if all(v == HOLDS for v in verdicts) else UNSURE


def finding(section: str, claim: str, statistic: str, value: float, ci, per_seed, threshold: str, verdict: str,
            **detail) -> dict:
    """One checked claim, JSON-able."""
    r = lambda v: None if v is None or not math.isfinite(v) else round(float(v), 4)   # noqa: E731
    return {"section": section, "claim": claim, "statistic": statistic, "value": r(value),
            "ci95": [r(ci[0]), r(ci[1])], "per_seed": [r(v) for v in per_seed], "threshold": threshold,
            "verdict": verdict, **detail}


def missing(section: str, claim: str, why: str) -> dict:
    """A claim whose evidence this run did not produce: reported, inconclusive."""
    return {"section": section, "claim": claim, "statistic": why, "value": None, "ci95": [None, None],
            "per_seed": [], "threshold": "", "verdict": UNSURE}


def seed_check(section: str, claim: str, statistic: str, per_seed, threshold: float, test=greater, **detail) -> dict:
    """A claim about one number per seed, judged on its t interval."""
    m, ci = seed_interval(per_seed)
    sign = ">" if test is greater else "<="
    return finding(section, claim, statistic, m, ci, per_seed, f"{sign} {threshold:g}", test(ci, threshold), **detail)


def _num(v) -> str:
    return "—" if v is None else f"{v:.3f}"


def table(fs: list[dict]) -> str:
    """The findings table: claim, evidence (value [95 % CI]; per seed), threshold, verdict."""
    rows = ["| section | claim | statistic | value [95 % CI] | per seed | threshold | verdict |",
            "|---|---|---|---|---|---|---|"]
    for f in fs:
        ci = f["ci95"]
        val = "—" if f["value"] is None else f"{f['value']:.3f} [{_num(ci[0])}, {_num(ci[1])}]"
        rows.append(f"| {f['section']} | {f['claim']} | {f['statistic']} | {val} | "
                    f"{', '.join(_num(v) for v in f['per_seed'])} | {f['threshold']} | **{f['verdict']}** |")
    return "\n".join(rows)


def verdict_line(f: dict) -> str:
    """One sentence for a section's text: the claim and what this run says of it."""
    ci = f["ci95"]
    ev = "" if f["value"] is None else f" ({f['statistic']} = {f['value']:.3f}, 95 % CI [{_num(ci[0])}, {_num(ci[1])}], threshold {f['threshold']})"
    return f"**{f['verdict'].capitalize()}** on this run: {f['claim'][0].lower() + f['claim'][1:]}{ev}."


# ---------------------------------------------------------------------------------------------------------------
# The lab's claims, each a function of its experiment's per-seed results (lab.load_results' "results" lists).

def chains_beat_direct(base: list[dict]) -> dict:
    """Chains beat direct answers from k >= 3: the smallest gap, over k >= 3, between forced S and forced A."""
    gap = [min(r["S"]["acc_by_k"][k] - r["A"]["acc_by_k"][k] for k in r["S"]["acc_by_k"] if int(k) >= 3) for r in base]
    return seed_check("1 base", "Chains beat direct answers at every k >= 3",
                      "min over k >= 3 of acc(forced S) - acc(forced A)", gap, 0.0)


def voting_cannot_rescue_direct(sampling: list[dict], margin: float = 0.05) -> dict:
    """Voting over N direct answers gains less than `margin` over the greedy direct answer."""
    n = sampling[0]["n_max"]
    if "A" not in sampling[0]["curves"]:
        return missing("3 sampling", "Voting cannot rescue direct answers", "needs the A (direct) pool")
    gain = [r["curves"]["A"]["maj"][n]["acc"] - r["curves"]["A"]["greedy"]["acc"] for r in sampling]
    return seed_check("3 sampling", f"Voting cannot rescue direct answers: maj@{n} of A gains less than {margin} "
                      "over greedy A", f"acc(A maj@{n}) - acc(A greedy)", gain, margin, test=at_most)


def budget_trades_accuracy_for_tokens(budgets: list[dict]) -> dict:
    """Capping T's chain at b steps: more budget, more accuracy and more tokens (b = 0 against the largest b)."""
    def rows(r):
        t = sorted((b for b in r["budgets"] if b["format"] == "T" and b["kind"] == "max"), key=lambda b: b["budget"])
        return t[0], t[-1]
    acc = [hi["acc"] - lo["acc"] for lo, hi in map(rows, budgets)]
    tok = [hi["tokens"] - lo["tokens"] for lo, hi in map(rows, budgets)]
    bmax = rows(budgets[0])[1]["budget"]
    a = seed_check("2 budgets", "", "", acc, 0.0)
    t = seed_check("2 budgets", "", "", tok, 0.0)
    return finding("2 budgets", f"Budget forcing trades accuracy for tokens: T capped at {bmax} steps is more accurate "
                   f"than at 0 steps, and costs more tokens", f"acc(T, <= {bmax}) - acc(T, <= 0)", a["value"],
                   a["ci95"], a["per_seed"], "> 0 (and the token difference > 0)", both(a["verdict"], t["verdict"]),
                   tokens={"value": t["value"], "ci95": t["ci95"], "per_seed": t["per_seed"]})


def frontier_gain(sampling: list[dict]) -> dict:
    """Snell et al.'s compute-optimal choice per k against the best single strategy, in tokens at equal target
    accuracy (selected on validation problems, scored on test): the ratio at the highest target every seed
    reaches. A ratio of 1 means one strategy is best at every k."""
    targets = [t["target"] for t in sampling[0]["frontier"]["targets"]]
    ok = [i for i in range(len(targets)) if all(r["frontier"]["targets"][i].get("reachable") for r in sampling)]
    claim = "Choosing the strategy per k saves tokens over the best single strategy"
    if not ok:
        return missing("4 frontier", claim, "no target reached on every seed")
    i = ok[-1]
    ratios = [r["frontier"]["targets"][i]["ratio"] for r in sampling]
    return seed_check("4 frontier", f"{claim}, at accuracy {targets[i]}",
                      "tokens(best single) / tokens(per-k choice) on test", ratios, 1.0,
                      single=[r["frontier"]["targets"][i]["fixed"]["strategy"] for r in sampling],
                      per_k=sampling[0]["frontier"]["targets"][i]["adaptive"]["per_k"])


def star_raises_free_accuracy(star: list[dict], variant: str = "main") -> dict:
    gain = [r[variant][-1]["free"] - r[variant][0]["free"] for r in star]
    rounds = len(star[0][variant]) - 1
    return seed_check("5 STaR", f"STaR raises free accuracy ({rounds} round(s), answer filter)",
                      "free acc after the last round - free acc of the base", gain, 0.0)


def chain_filter_vs_answer_filter(star: list[dict]) -> dict:
    """The chain filter (answer and every step right) against the answer filter, same rounds: final free
    accuracy. A claim that the step check matters needs this difference above zero."""
    if "chain" not in star[0]:
        return missing("5 STaR", "The chain filter beats the answer filter", "needs the chain-filter variant")
    diff = [r["chain"][-1]["free"] - r["main"][-1]["free"] for r in star]
    return seed_check("5 STaR", "The chain filter (every step checked) beats the answer filter in final free accuracy",
                      "free acc(chain filter) - free acc(answer filter), last round", diff, 0.0,
                      false_positive_rate=[r["main"][-1]["false_positive_rate"] for r in star])


def steps_to_solve(run: dict) -> float:
    """First probe step at greedy accuracy >= 0.99; a run that never got there counts its full length (censored:
    this understates the slower side's time, so a difference it supports is conservative)."""
    return run["solved"]["step"] if run["solved"] else run["steps"]


def rl_faster(rl: list[dict], fast: str, slow: str, claim: str) -> dict:
    if fast not in rl[0] or slow not in rl[0]:
        return missing("6 RL", claim, f"needs {fast} and {slow} in the RL experiment")
    diff = [steps_to_solve(r[slow]) - steps_to_solve(r[fast]) for r in rl]
    return seed_check("6 RL", claim, f"steps to 0.99: {slow} - {fast} (unsolved: the run's length)", diff, 0.0)


def adaptive_vs_always_s(adaptive: list[dict], tol: float = 0.01) -> list[dict]:
    """Each adaptive method against always-S on the same problems: no worse than tol in accuracy, fewer tokens."""
    out = []
    for i, run in enumerate(adaptive[0]["runs"]):
        m = run["method"]
        acc = [r["runs"][i]["acc"] - r["fixed"]["S"]["acc"] for r in adaptive]
        tok = [r["runs"][i]["tokens"] - r["fixed"]["S"]["tokens"] for r in adaptive]
        a = seed_check("7 adaptive", "", "", acc, -tol)
        t = seed_check("7 adaptive", "", "", tok, 0.0, test=at_most)
        out.append(finding("7 adaptive", f"{m} is as accurate as always-S (within {tol}) with fewer tokens",
                           f"acc({m}) - acc(always S)", a["value"], a["ci95"], a["per_seed"],
                           f"> -{tol} (and tokens({m}) - tokens(always S) < 0)", both(a["verdict"], t["verdict"]),
                           tokens={"value": t["value"], "ci95": t["ci95"], "per_seed": t["per_seed"]}))
    return out


def lab_findings(results: dict) -> list[dict]:
    """Every check whose experiment is in `results` ({experiment: {"results": [per seed]}})."""
    rs = {e: v["results"] for e, v in results.items()}
    out = []
    if "base" in rs:
        out.append(chains_beat_direct(rs["base"]))
    if "budgets" in rs:
        out.append(budget_trades_accuracy_for_tokens(rs["budgets"]))
    if "sampling" in rs:
        out += [voting_cannot_rescue_direct(rs["sampling"]), frontier_gain(rs["sampling"])]
    if "star" in rs:
        out += [star_raises_free_accuracy(rs["star"]), chain_filter_vs_answer_filter(rs["star"])]
    if "rl" in rs:
        out += [rl_faster(rs["rl"], "grpo", "reinforce", "GRPO reaches 0.99 in fewer steps than REINFORCE without a "
                          "baseline"),
                rl_faster(rs["rl"], "reinforce_baseline", "reinforce", "The baseline alone speeds REINFORCE up "
                          "(same loss, updates, no clip, no KL)")]
    if "adaptive" in rs:
        out += adaptive_vs_always_s(rs["adaptive"])
    if "l1" in rs:
        from . import budget
        out += budget.findings(rs["l1"])
    if "search" in rs:
        from . import search
        out += search.findings([r["search"] for r in rs["search"]])
    return out
