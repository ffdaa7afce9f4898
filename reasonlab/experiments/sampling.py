"""3-4. Sampling more (voting, pass@N) and verifiers with the compute-optimal frontier, on one sample pool."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..core.config import NS
from ..io import report
from ..methods import tts
from ..stats import findings
from ..stats.findings import at_most, missing, seed_check
from ..stats.summary import chance, pm
from . import Experiment, register
from .thresholds import THRESHOLDS as TH


@dataclass
class Config:
    n: int = 500
    """problems per k in the sampling grid"""
    n_max: int = 32
    """samples per problem (N = 1, 2, 4, ... up to this)"""

    def validate(self) -> None:
        if self.n_max not in NS:
            raise ValueError(f"n_max must be one of {', '.join(map(str, NS))}, got {self.n_max}")


def run(cfg: Config, seed: int, env) -> dict:
    return tts.run(env.base(seed), n_per_k=cfg.n, n_max=cfg.n_max, formats=("A", "S", "T"), seed=seed, budgets=False,
                   log=None)


def voting_cannot_rescue_direct(sampling: list[dict]) -> dict:
    """Voting over N direct answers gains less than the margin over the greedy direct answer."""
    margin = TH["sampling.vote_margin"]
    n = sampling[0]["n_max"]
    if "A" not in sampling[0]["curves"]:
        return missing("3 sampling", "Voting cannot rescue direct answers", "needs the A (direct) pool")
    gain = [r["curves"]["A"]["maj"][n]["acc"] - r["curves"]["A"]["greedy"]["acc"] for r in sampling]
    return seed_check("3 sampling", f"Voting cannot rescue direct answers: maj@{n} of A gains less than "
                      f"{margin.value:g} over greedy A", f"acc(A maj@{n}) - acc(A greedy)", gain, margin, test=at_most)


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
    chosen = [s for r in sampling for s in [r["frontier"]["targets"][i]["fixed"]["strategy"],
                                            *r["frontier"]["targets"][i]["adaptive"]["per_k"].values()]]
    one_sample = all(s.endswith("@1") for s in chosen)
    return seed_check("4 frontier", f"{claim}, at accuracy {targets[i]}",
                      "tokens(best single) / tokens(per-k choice) on test", ratios, TH["sampling.frontier_ratio"],
                      untestable="no variance by construction: every strategy chosen draws one sample, whose tokens "
                      "are fixed by its format and k, so the ratio is the formats' token counts" if one_sample else None,
                      single=[r["frontier"]["targets"][i]["fixed"]["strategy"] for r in sampling],
                      per_k=sampling[0]["frontier"]["targets"][i]["adaptive"]["per_k"])



def claims(rs: list[dict]) -> list[dict]:
    return [voting_cannot_rescue_direct(rs), frontier_gain(rs)]


def render_sampling(rs: list[dict], out: str) -> tuple[str, str]:
    report.plot_tts_vs_n(rs[0], os.path.join(out, "sampling", "acc_vs_n.png"))
    report.plot_tts_per_k(rs[0], os.path.join(out, "sampling", "per_k.png"))
    n = rs[0]["n_max"]
    rows = ["| format | greedy | maj@1 | maj@8 | maj@" + str(n) + " | pass@" + str(n) + " (oracle) | tokens@" + str(n) + " |",
            "|---|---|---|---|---|---|---|"]
    for f in rs[0]["formats"]:
        def acc(m, N):
            return [r["curves"][f][m][N]["acc"] for r in rs]
        rows.append(f"| {f} | {pm([r['curves'][f]['greedy']['acc'] for r in rs])} | {pm(acc('maj', 1))} | "
                    f"{pm(acc('maj', min(8, n)))} | {pm(acc('maj', n))} | {pm(acc('pass', n))} | "
                    f"{np.mean([r['curves'][f]['tokens'][n] for r in rs]):.0f} |")
    rows.append(f"| chance | {' | '.join(f'{chance(m, n):.3f}' for m in ('maj', 'maj', 'maj', 'maj', 'pass'))} | |")
    fmts = rs[0]["formats"]
    if "A" in fmts:
        head = f"A maj@{n} {pm([r['curves']['A']['maj'][n]['acc'] for r in rs])} vs greedy A " \
               f"{pm([r['curves']['A']['greedy']['acc'] for r in rs])}"
        direct = (f"pass@{n} of direct answers is {pm([r['curves']['A']['pass'][n]['acc'] for r in rs])} where "
                  f"guessing gives {chance('pass', n):.3f}.")
    else:
        head, direct = f"{fmts[0]} maj@{n} {pm([r['curves'][fmts[0]]['maj'][n]['acc'] for r in rs])}", ""
    greedy = "; ".join(f"greedy {f} {pm([r['curves'][f]['greedy']['acc'] for r in rs])}" for f in fmts)
    md = f"""## Sampling more: voting

> **Question.** Instead of thinking, sample N direct answers and take the majority. Does voting buy what a chain
> buys?

![accuracy against N](sampling/acc_vs_n.png)

![per k](sampling/per_k.png)

{chr(10).join(rows)}

{rs[0]['n_per_k']} problems per k, N up to {n} samples at temperature 1, mean ± std over seeds (the picture: first
seed, 95 % bootstrap bands over problems; grey: chance for one answer and for pass@N, 1 − 0.9^N).
{findings.verdict_line(voting_cannot_rescue_direct(rs))} {direct} For comparison: {greedy}. Whether
voting helps chains that err is measured on the erring thinker (the `search` and `voting` experiments).

*Papers:* self-consistency (Wang et al. 2022, arXiv 2203.11171); pass@k (Chen et al. 2021, arXiv 2107.03374);
repeated sampling (Brown et al. 2024, arXiv 2407.21787).
*Explore:* `reasonlab tts --formats A free --n-max 64`, or a probability-weighted vote (`tts.weighted_vote`).
"""
    return md, head


def render_verifiers(rs: list[dict], out: str) -> tuple[str, str]:
    report.plot_tts_frontier(rs[0], os.path.join(out, "sampling", "frontier.png"))
    n = rs[0]["n_max"]
    rows = [f"| format | maj@{n} | best-of-{n}, process verifier | verified pass@{n} |", "|---|---|---|---|"]
    for f in rs[0]["formats"]:
        rows.append(f"| {f} | " + " | ".join(pm([r["curves"][f][m][n]["acc"] for r in rs])
                                             for m in ("maj", "verifier", "verified_pass")) + " |")
    trows = ["| target accuracy | compute-optimal per k: tokens | best fixed strategy: tokens | fixed / optimal |", "|---|---|---|---|"]
    head = ""
    for i, t in enumerate(rs[0]["frontier"]["targets"]):
        ts = [r["frontier"]["targets"][i] for r in rs]
        if all(x.get("reachable") for x in ts):
            trows.append(f"| {t['target']} | {pm([x['adaptive']['tokens'] for x in ts], '{:.2f}')} | "
                         f"{pm([x['fixed']['tokens'] for x in ts], '{:.2f}')} | {pm([x['ratio'] for x in ts], '{:.2f}')}× |")
            head = f"compute-optimal per k uses {pm([x['ratio'] for x in ts], '{:.2f}')}× fewer tokens at {t['target']}"
    md = f"""## Verifiers and the compute-optimal frontier

> **Question.** Every chain step can be checked (a process verifier). Does picking a verified sample beat the
> vote, and what is the cheapest strategy for each difficulty?

![accuracy against tokens](sampling/frontier.png)

{chr(10).join(rows)}

{chr(10).join(trows)}

The rule's process verifier accepts only chains whose every step checks, so it has nothing to say about a direct
answer (its vote falls back to the plain majority). The frontier's candidates are every strategy run here:
greedy per format, budget-capped greedy chains, majority, probability-weighted vote and verifier best-of-N at every
N. Per k and on the validation problems it picks the cheapest candidate reaching each target; on the disjoint
test problems (`evaluate.split_of`) it compares those tokens with the cheapest single candidate that reaches the
target at every k. Mean ± std over seeds. {findings.verdict_line(frontier_gain(rs))}

*Papers:* Let's verify step by step (Lightman et al. 2023, arXiv 2305.20050); compute-optimal test-time scaling
(Snell et al. 2024, arXiv 2408.03314).
*Explore:* `tts.frontier(pools)` with your own targets, or `reasonlab tts --formats A S T free`.
"""
    return md, head



def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    return [render_sampling(rs, out), render_verifiers(rs, out)]


register(Experiment("sampling", Config, run, claims, render, keys=("curves", "formats", "frontier", "n_max"), quick=Config(n=40, n_max=8), run_cost=14,
                    render_cost=1.1))
