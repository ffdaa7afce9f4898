"""Learned verifiers' quality, then search with them (best-of-N, weighted vote, beam search, DVTS), on the erring
thinker (the quick lab: on the quick base model)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..io.checkpoint import write_json, write_text
from ..methods import search as search_method
from ..methods import verifier
from ..methods.search import cell, compute_optimal, per_problem, unints
from ..stats import findings
from ..stats.summary import pm
from ..train.zoo import on_erring, thinker_model
from . import Experiment, register, verifiers
from .plots import plot_curves, plot_tokens
from .thresholds import THRESHOLDS as TH


@dataclass
class Config:
    n_test: int = 100
    """test problems per k"""
    n_val: int = 50
    """validation problems per k (compute-optimal selection)"""
    n_max: int = 64
    """largest N"""
    quick_verifiers: bool = False
    """tiny verifiers (quick mode)"""
    thinker: Literal["erring", "base", "quick"] = "erring"
    """the model searched over: the erring thinker, the base model, or the quick lab's base model"""


def run(cfg: Config, seed: int, env) -> dict:
    sc = search_method.SearchConfig(thinker=cfg.thinker, n_test=cfg.n_test, n_val=cfg.n_val, n_max=cfg.n_max,
                                    quick_verifiers=cfg.quick_verifiers)
    thinker = thinker_model(sc.thinker, seed, env.cache, env.device)
    vcfg = search_method.verifier_config(sc)
    quality = {"seed": seed, "thinker": sc.thinker, "kinds": {}}
    for kind in sc.verifiers:          # verifier.run's measurement, on this thinker (quick mode has its own)
        v = verifier.train_verifier(kind, thinker, seed, vcfg, cache=env.cache, log=None)
        q = verifier.verifier_quality(v, thinker, seed, cfg.n_test, vcfg)
        quality["kinds"][kind] = {**q, "train": {k: v.meta[k] for k in ("seconds", "n_outputs", "n_steps",
                                                                        "positive_share", "loss_first", "loss_last")}}
    return {"verifiers": quality, "search": search_method.run(sc, seed, cache=env.cache, device=env.device, log=None)}


def claims(rs: list[dict]) -> list[dict]:
    return search_claims([r["search"] for r in rs])


def render_verifiers(rs: list[dict], out: str) -> tuple[str, str]:
    q = [r["verifiers"] for r in rs]
    md = verifiers.page(q, out)        # writes out/verifier_quality.png, linked from report.md beside it
    head = ", ".join(f"{k} step AUROC {pm([x['kinds'][k]['step_auroc'] for x in q])}" for k in q[0]["kinds"])
    return md, head


def render_search(rs: list[dict], out: str) -> tuple[str, str]:
    res = [r["search"] for r in rs]
    fs = search_claims(res)    # computed once for the page and the line
    md = page(res, os.path.join(out, "search"), prefix="search/", fs=fs)
    return md, headline(res, fs)


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    return [render_search(rs, out), render_verifiers(rs, out)]





def _acc(r, name, N, k=None) -> float | None:
    return None if cell(r, name, N) is None else float(per_problem(r, name, N, k=k)[0].mean())


def _compare(results, a, b, N, claim, threshold, k=None, test=findings.greater, **detail):
    """One seed's statistic is acc(a) - acc(b) on its test problems; the verdict is the t interval's over seeds."""
    if any(cell(r, a, N) is None or cell(r, b, N) is None for r in results):
        return None
    base = [_acc(r, b, N, k) for r in results]
    diff = [_acc(r, a, N, k) - x for r, x in zip(results, base)]
    acc_b = float(np.mean(base))                                       # a - b lies in [-acc_b, 1 - acc_b]
    return findings.seed_check("9 search", claim, f"acc({a}@{N}) - acc({b}@{N})" + (f" at k = {k}" if k else ""), diff,
                        threshold, test=test, room=(-acc_b, 1 - acc_b), **detail)


def search_claims(results: list[dict]) -> list[dict]:
    """The search claims over seeds (test problems; one statistic per seed, t intervals), primary first: does a
    learned verifier beat voting without one?"""
    r0 = results[0]
    Nmax = max(int(n) for n in r0["strategies"]["majority"]["test"])
    ks = sorted(set(r0["k"]["test"]))
    lv = [v for v in r0["config"]["search_verifiers"] if v != "oracle"]
    prm = lv[0] if lv else "prm"
    who = f"({r0['config']['thinker']} thinker)"
    out = [_compare(results, f"weighted/{prm}", "majority", Nmax, f"at N = {Nmax}, weighted voting with the learned "
                    f"{prm} beats majority voting, the same samples without a verifier {who}", TH["search.beats"],
                    control="majority"),
           _compare(results, f"weighted/{prm}", "weighted/orm", Nmax, f"at N = {Nmax}, weighted/{prm} beats "
                    f"weighted/orm {who}", TH["search.beats"]),
           findings.seed_check("9 search", f"at N = {Nmax}, majority beats greedy {who}", f"acc(majority@{Nmax}) - "
                        "acc(greedy)", [_acc(r, "majority", Nmax) - _acc(r, "greedy", 1) for r in results],
                        TH["search.beats"], control="greedy")]
    small = min(4, Nmax)
    for v in dict.fromkeys((prm, "oracle")):          # the learned PRM (the claim), then the oracle (its upper bound)
        out += [_compare(results, f"beam/{v}", f"bon/{v}", small, f"beam search beats best-of-N at a small budget "
                         f"(N = {small}) on the hardest k ({ks[-1]}), {v} verifier", TH["search.beats"], k=ks[-1]),
                _compare(results, f"beam/{v}", f"bon/{v}", Nmax, f"beam search loses to or ties best-of-N at a large "
                         f"budget (N = {Nmax}) on the easiest k ({ks[0]}), {v} verifier", TH["search.easy_tie"],
                         k=ks[0], test=findings.at_most),
                _compare(results, f"dvts/{v}", f"beam/{v}", Nmax, f"DVTS is at least as good as beam search at "
                         f"N = {Nmax} (non-inferiority), {v} verifier", TH["search.non_inferior"]),
                _compare(results, f"beam_dedup/{v}", f"beam/{v}", Nmax, f"beam search with search-and-learn's "
                         f"filter_duplicates beats it without at N = {Nmax}, {v} verifier", TH["search.beats"])]
    if cell(r0, f"bon/{prm}", Nmax) and cell(r0, "bon/oracle", Nmax):
        lo = max(1, Nmax // 4)
        rise = [_acc(r, f"bon/{prm}", Nmax) - _acc(r, f"bon/{prm}", lo) for r in results]
        orise = [_acc(r, "bon/oracle", Nmax) - _acc(r, "bon/oracle", lo) for r in results]
        a = findings.seed_check("9 search", "", "", rise, TH["search.overopt"], test=findings.at_most)
        o = findings.seed_check("9 search", "", "", orise, 0.0)
        out.append(findings.finding("9 search", f"best-of-N with the learned {prm} is over-optimised: its true accuracy stops "
                             f"rising over the last 4x of N (N = {lo} to {Nmax}) while the oracle's still rises",
                             f"acc(bon/{prm}@{Nmax}) - acc(bon/{prm}@{lo})", a["value"], a["ci95"], a["per_seed"],
                             "<= 0 (and the oracle's rise > 0)", findings.both(a["verdict"], o["verdict"]),
                             p=max(a["p"], o["p"]), source=TH["search.overopt"].source,
                             oracle_rise={"value": o["value"], "ci95": o["ci95"], "per_seed": o["per_seed"]}))
    if cell(r0, "bon/prm-mc", Nmax) and cell(r0, "bon/prm", Nmax):
        out.append(_compare(results, "bon/prm", "bon/prm-mc", Nmax, f"Math-Shepherd labels get within 0.05 of the "
                            f"oracle-label PRM trained on the same outputs (best-of-{Nmax})", TH["search.label_margin"],
                            test=findings.at_most))
    co = [compute_optimal(r) for r in results]
    common = [i for i in range(len(co[0])) if all(c[i]["reachable"] for c in co)]
    claim = ("the compute-optimal strategy per k needs fewer tokens than the best single strategy at matched accuracy "
             "(per-k choice cross-fitted on validation, read on test; learned verifiers only)")
    if common:
        i = common[-1]
        ratio = [c[i]["fixed_test_cost"] / c[i]["test_cost"] for c in co]
        gap = [c[i]["test_acc"] - c[i]["fixed_test_acc"] for c in co]
        rt = findings.seed_check("9 search", "", "", ratio, TH["search.saving"])
        g = findings.seed_check("9 search", "", "", gap, TH["search.acc_gap"])
        out.append(findings.finding("9 search", f"{claim}, target {co[0][i]['target']}", "tokens(best single) / "
                             "tokens(per-k choice) on test, tokens = generated + verifier", rt["value"], rt["ci95"],
                             rt["per_seed"], "> 1 (and test accuracy gap > -0.02)", findings.both(rt["verdict"], g["verdict"]),
                             p=max(rt["p"], g["p"]), source=TH["search.saving"].source,
                             accuracy_gap={"value": g["value"], "ci95": g["ci95"], "per_seed": g["per_seed"]},
                             frontier=[{k: (round(x, 4) if isinstance(x, float) else x) for k, x in t.items()}
                                       for t in co[0]],
                             strategies=[{"per_k": c[i]["chosen"], "single": c[i]["fixed"]} for c in co]))
    else:
        out.append(findings.missing("9 search", claim, "no accuracy target reached at every k by a single strategy in every "
                             "seed", threshold="> 1"))
    return [f for f in out if f is not None]


def table(results: list[dict], Ns=(1, 4, 16, 64)) -> str:
    """Test accuracy (mean ± std over seeds) per strategy at a few N, with compute at the largest."""
    nmax = max(int(n) for n in results[0]["strategies"]["majority"]["test"])
    Ns = [n for n in Ns if n <= nmax]
    rows = ["| strategy | " + " | ".join(f"acc @{n}" for n in Ns) + f" | generated tokens @{Ns[-1]} | verifier tokens "
            f"@{Ns[-1]} | GFLOPs @{Ns[-1]} |", "|---" * (4 + len(Ns)) + "|"]
    for name in results[0]["strategies"]:
        cells, last = [], None
        for N in Ns:
            if name == "greedy" and N > 1:     # one answer: compute stays that of N = 1
                cells.append("—")
                continue
            per = [per_problem(r, name, N) for r in results]
            cells.append(pm([p[0].mean() for p in per]))
            last = per
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {np.mean([p[1].mean() for p in last]):.1f} | "
                    f"{np.mean([p[2].mean() for p in last]):.1f} | {np.mean([p[3].mean() for p in last]) / 1e9:.3f} |")
    return "\n".join(rows)


def frontier_table(results: list[dict]) -> str:
    """Compute-optimal against the best single strategy at every target: test accuracy and tokens of each, first
    seed (the claim reads one target over all seeds)."""
    rows = ["| target | per-k choice: test acc / tokens | best single: test acc / tokens | single strategy |",
            "|---|---|---|---|"]
    for t in compute_optimal(results[0]):
        if t["reachable"]:
            rows.append(f"| {t['target']} | {t['test_acc']:.3f} / {t['test_cost']:.0f} | {t['fixed_test_acc']:.3f} / "
                        f"{t['fixed_test_cost']:.0f} | {t['fixed']} |")
        else:
            rows.append(f"| {t['target']} | not reached | | |")
    return "\n".join(rows)


def verifier_cost_table(results: list[dict]) -> str:
    """Verifier tokens per problem at the largest N: read from the start (the comparisons) against a causal
    verifier that keeps its cache (the sensitivity row)."""
    nmax = max(int(n) for n in results[0]["strategies"]["majority"]["test"])
    rows = ["| strategy | verifier tokens, re-read | verifier tokens, incremental |", "|---|---|---|"]
    for name in results[0]["strategies"]:
        c = [cell(r, name, nmax) for r in results]
        if "/" not in name or any(x is None or "ver_inc" not in x for x in c):
            continue
        full = np.mean([unints(x["ver"]).mean() for x in c])
        inc = np.mean([unints(x["ver_inc"]).mean() for x in c])
        rows.append(f"| {name}@{nmax} | {full:.0f} | {inc:.0f} |")
    return "\n".join(rows)


def page(results: list[dict], out: str, prefix: str = "", fs: list[dict] | None = None) -> str:
    """Plots (acc_vs_n.png, acc_vs_compute.png, tokens.png), the tables and the findings, as a markdown section
    whose pictures are linked as prefix + file name (the lab: "search/"); also writes out/findings.json and
    out/section.md."""
    plot_curves(results, os.path.join(out, "acc_vs_n.png"), "N")
    plot_curves(results, os.path.join(out, "acc_vs_compute.png"), "flops")
    plot_tokens(results, os.path.join(out, "tokens.png"))
    fs = search_claims(results) if fs is None else fs
    write_json(os.path.join(out, "findings.json"), fs)
    c = results[0]["config"]
    P = len(results[0]["k"]["test"])
    md = f"""## Verifiers and search

> **Question.** With a thinker whose chains err and verifiers learned from its own samples, which search turns
> more test-time compute into accuracy: best-of-N, weighted majority, PRM-guided beam search or DVTS? Where is a
> learned verifier fooled, and what does the compute-optimal strategy per k save?

![accuracy against N]({prefix}acc_vs_n.png)

![accuracy against compute]({prefix}acc_vs_compute.png)

![accuracy against generated and verifier tokens]({prefix}tokens.png)

{table(results)}

{P} distinct test problems (up to {c['n_test']} per k; {results[0]['k']['test'].count(2)} at k = 2, whose "test"
quarter holds 25) and up to {c['n_val']} validation problems
per k, from the "test" and "val" quarters of the problem space (no verifier trains on them); the {c['thinker']}
thinker writes forced {c['force']} chains at temperature {c['temperature']}; seeds
{', '.join(str(r['seed']) for r in results)} (mean ± std over seeds). Every method scores an output by `{c['agg']}`
of its step scores. Beam search and DVTS are search-and-learn's (M = {c['width']}; `beam_dedup` with its
filter_duplicates). Compute: generated tokens include the forced format token; verifier tokens = prompt + output
per scored sequence, every round re-read; FLOPs = 2 · P_gen · (prompt + generated) + 2 · P_ver · verifier tokens.
Chance is 0.1.

**Compute-optimal per k against the best single strategy** (first seed; the per-k choice is cross-fitted on the
validation problems, both are read on test):

{frontier_table(results)}

**Verifier cost, a sensitivity row**: a causal verifier that keeps its cache reads each step once:

{verifier_cost_table(results)}

**Findings** (95 % t intervals over seeds of each seed's statistic; the first is this experiment's primary claim):

{findings.table(fs)}

*Papers:* Lightman et al. 2023 (arXiv 2305.20050); Snell et al. 2024 (arXiv 2408.03314); Math-Shepherd (Wang et
al. 2023, arXiv 2312.08935); Gao et al. 2022 (arXiv 2210.10760); HF search-and-learn (beam search, DVTS).
*Explore:* `reasonlab search --method beam dvts --width 2`, `--agg prod`, `--thinker base` (the contrast).
"""
    write_text(os.path.join(out, "section.md"), md)
    return md


def headline(results: list[dict], fs: list[dict] | None = None) -> str:
    """One line for the lab's summary table, computed from the findings (`fs`: search_claims(results), if computed)."""
    fs = search_claims(results) if fs is None else fs
    nmax = max(int(n) for n in results[0]["strategies"]["majority"]["test"])
    acc = {n: np.mean([per_problem(r, n, nmax if n != "greedy" else 1)[0].mean() for r in results])
           for n in ("greedy", "majority", "weighted/prm", "bon/oracle") if cell(results[0], n, 1)}
    held = sum(f["verdict"] == "holds" for f in fs)
    return (", ".join(f"{n} {v:.3f}" for n, v in acc.items()) + f" (N = {nmax}); {held}/{len(fs)} findings hold")


register(Experiment("search", Config, run, claims, render, depends=on_erring(verifier.VerifierConfig),
                    keys=("verifiers", "search"), run_cost=52, render_cost=6.1, takes_checkpoint=False,
                    quick=Config(n_test=4, n_val=3, n_max=4, quick_verifiers=True, thinker="quick")))
