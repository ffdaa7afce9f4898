"""The learned verifiers' section: their quality (step and outcome AUROC, calibration, training cost) over seeds.
The search experiment renders it first; `reasonlab verifier train` renders it alone."""
from __future__ import annotations

import os
import warnings

import numpy as np

from ..io.report import plt, save
from ..stats.findings import at_most, greater, seed_interval
from ..stats.summary import pm


def _seed_check(per_seed, test, thr) -> tuple[float, float, float, str]:
    """findings.seed_interval over the seeds that have a value (an AUROC is NaN when a class is missing), judged by
    test (findings.greater / at_most): mean, CI, verdict."""
    xs = [x for x in per_seed if x == x]
    if len(xs) < 2:
        return float(np.mean(xs)) if xs else float("nan"), float("nan"), float("nan"), \
            "inconclusive (fewer than 2 seeds)"
    m, ci = seed_interval(xs)
    return m, ci[0], ci[1], test(ci, thr)


def plot_quality(results: list[dict], path: str) -> str:
    """Reliability diagram (bins pooled over seeds; diagonal = calibrated) and step AUROC per k (mean, min..max
    over seeds; 0.5 = chance)."""
    kinds = list(results[0]["kinds"])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    a1.plot([0, 1], [0, 1], color="grey", ls=":", lw=1, label="calibrated")
    for kind in kinds:
        pooled: dict[float, list] = {}
        for r in results:
            for b in r["kinds"][kind]["step_bins"]:
                pooled.setdefault(b["lo"], []).append(b)
        xs = sorted(pooled)
        n = [sum(b["n"] for b in pooled[x]) for x in xs]
        sc = [sum(b["score"] * b["n"] for b in pooled[x]) / m for x, m in zip(xs, n)]
        pos = [sum(b["positive"] * b["n"] for b in pooled[x]) / m for x, m in zip(xs, n)]
        a1.plot(sc, pos, marker="o", ms=3, label=kind)
        ks = sorted(int(k) for k in results[0]["kinds"][kind]["step_auroc_by_k"])
        y = np.array([[r["kinds"][kind]["step_auroc_by_k"][str(k) if str(k) in r["kinds"][kind]["step_auroc_by_k"]
                                                           else k] for k in ks] for r in results], dtype=float)
        with warnings.catch_warnings():   # a k where every seed lacks a class has no AUROC: a gap in the line
            warnings.simplefilter("ignore", RuntimeWarning)
            line, = a2.plot(ks, np.nanmean(y, 0), marker="o", ms=3, label=kind)
            a2.fill_between(ks, np.nanmin(y, 0), np.nanmax(y, 0), color=line.get_color(), alpha=0.15)
    a2.axhline(0.5, color="grey", ls=":", lw=1, label="chance (0.5)")
    a1.set_xlabel("verifier score (step)")
    a1.set_ylabel("share of steps right (oracle)")
    a1.set_title("calibration, held-out steps")
    a2.set_xlabel("k (digits)")
    a2.set_ylabel("step AUROC vs oracle")
    a2.set_title("step AUROC per k")
    a1.legend(fontsize=8)
    a2.legend(fontsize=8)
    return save(fig, path)


def page(results: list[dict], out: str, margin: float = 0.05, time_budget: float = 30.0) -> str:
    """The verifier section: quality table (mean ± std over seeds), the Math-Shepherd margin as a check, the plot."""
    kinds = list(results[0]["kinds"])
    plot_quality(results, os.path.join(out, "verifier_quality.png"))
    rows = ["| verifier | step AUROC | chain-step AUROC | step ECE | outcome AUROC last / min / prod | train s |",
            "|---|---|---|---|---|---|"]
    for kind in kinds:
        q = [r["kinds"][kind] for r in results]
        rows.append(f"| {kind} | {pm([x['step_auroc'] for x in q])} | {pm([x['chain_step_auroc'] for x in q])} | "
                    f"{pm([x['step_ece'] for x in q])} | "
                    + " / ".join(pm([x["outcome_auroc"][a] for x in q]) for a in ("last", "min", "prod"))
                    + f" | {pm([x['train']['seconds']['total'] for x in q], '{:.1f}')} |")
    lines = []
    if "prm" in kinds and "prm-mc" in kinds:
        gap = [r["kinds"]["prm"]["step_auroc"] - r["kinds"]["prm-mc"]["step_auroc"] for r in results]
        m, lo, hi, verdict = _seed_check(gap, at_most, margin)
        lines.append(f"Math-Shepherd labels within {margin} step AUROC of the oracle-label PRM: gap (prm − prm-mc) "
                     f"{m:.3f}, 95 % CI [{lo:.3f}, {hi:.3f}] over {len(gap)} seeds (per seed "
                     + ", ".join(f"{g:.3f}" for g in gap) + f"): **{verdict}**.")
    if "prm" in kinds and "orm" in kinds:
        gap = [r["kinds"]["prm"]["step_auroc"] - r["kinds"]["orm"]["step_auroc"] for r in results]
        m, lo, hi, verdict = _seed_check(gap, greater, 0.0)
        lines.append(f"The PRM separates steps better than the ORM (step AUROC gap prm − orm > 0): {m:.3f}, 95 % CI "
                     f"[{lo:.3f}, {hi:.3f}] (per seed " + ", ".join(f"{g:.3f}" for g in gap) + f"): **{verdict}**.")
    secs = [r["kinds"][k]["train"]["seconds"]["total"] for r in results for k in kinds]
    lines.append(f"Each verifier trains in ≤ {time_budget:g} s: slowest {max(secs):.1f} s, fastest {min(secs):.1f} s "
                 f"(sampling, labels and fitting; the kinds of a seed share one draw of samples, whose time the first "
                 f"kind carries; wall time of the run that made the results): "
                 f"**{'holds' if max(secs) <= time_budget else 'does not hold'}**.")
    n_out = results[0]["kinds"][kinds[0]]["n_outputs"]
    seeds = ", ".join(str(r["seed"]) for r in results)
    return f"""## Verifiers: learned ORM and PRMs against the oracle

> **Question.** A verifier learned from the thinker's own samples scores each chain step. How well do its
> scores separate right steps from wrong ones, and are they calibrated?

![verifier quality](verifier_quality.png)

{chr(10).join(rows)}

{chr(10).join(l + chr(10) for l in lines)}
The {results[0]['thinker']} thinker's samples (temperature 1, formats forced S / T / A) of held-out problems
({n_out} outputs per seed, problems from a quarter of problem space no verifier trains on); seeds {seeds};
mean ± std over seeds. Step AUROC: all steps (chain sums and the answer) scored against the rule's step labels
(0.5 = chance); outcome AUROC: the aggregated score against the final answer being right. ECE over 10 equal-width
bins. The ORM learns from the outcome only, the PRM from the rule's step labels, prm-mc from rollout shares.

*Papers:* ORM (Cobbe et al. 2021, arXiv 2110.14168); PRM (Lightman et al. 2023, arXiv 2305.20050);
Math-Shepherd (Wang et al. 2023, arXiv 2312.08935).
*Explore:* `VerifierConfig(rollouts=..., steps=..., init="scratch")`, `verifier_quality(v, thinker)`.
"""
