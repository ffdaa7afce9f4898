"""Learned verifiers' quality, then search with them (best-of-N, weighted vote, beam search, DVTS), on the erring
thinker (the quick lab: on the quick base model)."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from ..io.checkpoint import write_json, write_text
from ..io.report import log_x, plt, save
from ..methods import search as search_method
from ..methods.search import cell, compute_optimal, per_problem
from ..methods import verifier
from ..stats import findings as F
from ..stats.findings import hier_bootstrap
from ..stats.summary import pm
from ..train.sft import ERR_CFG
from ..train.zoo import thinker_model
from . import Experiment, register, verifiers


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


def depends(cfg: Config) -> dict:
    """The erring thinker's and the verifiers' settings: a change to either reruns the search."""
    return {"erring": ERR_CFG, "verifier": asdict(verifier.VerifierConfig())}


def claims(rs: list[dict]) -> list[dict]:
    return findings([r["search"] for r in rs])


def render_verifiers(rs: list[dict], out: str) -> tuple[str, str]:
    q = [r["verifiers"] for r in rs]
    md = verifiers.page(q, out)        # writes out/verifier_quality.png, linked from report.md beside it
    head = ", ".join(f"{k} step AUROC {pm([x['kinds'][k]['step_auroc'] for x in q])}" for k in q[0]["kinds"])
    return md, head


def render_search(rs: list[dict], out: str) -> tuple[str, str]:
    res = [r["search"] for r in rs]
    fs = findings(res)    # a two-level bootstrap per claim: computed once for the page and the line
    return page(res, os.path.join(out, "search"), prefix="search/", fs=fs), headline(res, fs)


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    return [render_verifiers(rs, out), render_search(rs, out)]





def _diff(a, b):
    return a.mean() - b.mean()


def _finding(claim, stat_name, value, ci, per_seed, threshold, verdict, **detail) -> dict:
    return F.finding("9 search", claim, stat_name, value, ci, per_seed, threshold, verdict, **detail)


def _compare(results, a, b, N, claim, k=None, kind="greater", thr=0.0):
    arrs = []
    for r in results:
        if cell(r, a, N) is None or cell(r, b, N) is None:
            return None
        arrs.append((per_problem(r, a, N, k=k)[0], per_problem(r, b, N, k=k)[0]))
    v, ci, ps = hier_bootstrap(arrs, _diff)
    if kind == "greater":
        verdict = F.greater(ci, thr)
    elif kind == "at_most":          # A - B <= thr (A loses or ties)
        verdict = "holds" if ci[1] <= thr else "does not hold" if ci[0] > 0 else "inconclusive"
    else:                            # "at_least": A - B >= -thr (non-inferior within thr)
        verdict = "holds" if ci[0] > -thr else "does not hold" if ci[1] < 0 else "inconclusive"
    sign = {"greater": ">", "at_most": "<=", "at_least": ">= -"}[kind]
    return _finding(claim, f"acc({a}@{N}) - acc({b}@{N})" + (f" at k = {k}" if k else ""), v, ci, ps,
                    f"{sign}{thr}", verdict)


def _mean_acc(co, i, which) -> float:
    return round(float(np.mean([c[i][which][0].mean() for c in co])), 4)


def findings(results: list[dict], margin_ms: float = 0.05, tie: float = 0.02, noninf: float = 0.01,
             ratio_thr: float = 1.05) -> list[dict]:
    """The issue's claims as computed checks over seeds (test problems; 95 % two-level bootstrap intervals).
    Each: claim, statistic, value, ci95, per_seed, threshold, verdict (holds / does not hold / inconclusive)."""
    r0 = results[0]
    Nmax = max(int(n) for n in r0["strategies"]["majority"]["test"])
    ks = sorted(set(r0["k"]["test"]))
    lv = [v for v in r0["config"]["search_verifiers"] if v != "oracle"]
    prm = lv[0] if lv else "prm"
    out = []
    who = f"({r0['config']['thinker']} thinker)"
    for a, b in (("weighted/prm", "weighted/orm"), ("weighted/orm", "majority")):
        f = _compare(results, a, b, Nmax, f"at N = {Nmax}, {a} beats {b} {who}")
        if f:
            out.append(f)
    # greedy is one answer: maj@Nmax against greedy's single answer
    arrs = [(per_problem(r, "majority", Nmax)[0], per_problem(r, "greedy", 1)[0]) for r in results]
    v, ci, ps = hier_bootstrap(arrs, _diff)
    out.append(_finding(f"at N = {Nmax}, majority beats greedy {who}", f"acc(majority@{Nmax}) - acc(greedy)", v, ci,
                        ps, ">0", F.greater(ci, 0.0)))
    small = min(4, Nmax)
    for v in dict.fromkeys((prm, "oracle")):          # the learned PRM (the claim), then the oracle (its upper bound)
        f = _compare(results, f"beam/{v}", f"bon/{v}", small, f"beam search beats best-of-N at a small budget "
                     f"(N = {small}) on the hardest k ({ks[-1]}), {v} verifier", k=ks[-1])
        if f:
            out.append(f)
        f = _compare(results, f"beam/{v}", f"bon/{v}", Nmax, f"beam search loses to or ties best-of-N at a large "
                     f"budget (N = {Nmax}) on the easiest k ({ks[0]}), tie margin {tie}, {v} verifier", k=ks[0],
                     kind="at_most", thr=tie)
        if f:
            out.append(f)
        f = _compare(results, f"dvts/{v}", f"beam/{v}", Nmax, f"DVTS is at least as good as beam search at "
                     f"N = {Nmax} (non-inferiority margin {noninf}), {v} verifier", kind="at_least", thr=noninf)
        if f:
            out.append(f)
    if cell(r0, f"bon/{prm}", Nmax) and cell(r0, "bon/oracle", Nmax):
        lo_n = min(4, Nmax)

        def growth(o_hi, l_hi, o_lo, l_lo):
            return (o_hi.mean() - l_hi.mean()) - (o_lo.mean() - l_lo.mean())
        arrs = [tuple(per_problem(r, n, N)[0] for N in (Nmax, lo_n) for n in ("bon/oracle", f"bon/{prm}"))
                for r in results]
        v, ci, ps = hier_bootstrap(arrs, growth)
        gap = hier_bootstrap([(a[0], a[1]) for a in arrs], _diff)
        rise = hier_bootstrap([(a[1], per_problem(r, f"bon/{prm}", max(1, Nmax // 4))[0])
                               for a, r in zip(arrs, results)], _diff)
        out.append(_finding(f"the learned verifier ({prm}) is over-optimised in best-of-N: its gap to the oracle grows "
                            f"from N = {lo_n} to N = {Nmax}", f"gap@{Nmax} - gap@{lo_n}, gap = acc(bon/oracle) - "
                            f"acc(bon/{prm})", v, ci, ps, ">0", F.greater(ci, 0.0),
                            gap_at_nmax={"value": round(gap[0], 4), "ci95": [round(x, 4) for x in gap[1]]},
                            learned_rise_last_4x={"value": round(rise[0], 4), "ci95": [round(x, 4) for x in rise[1]]}))
    if cell(r0, "bon/prm-mc", Nmax) and cell(r0, "bon/prm", Nmax):
        arrs = [(per_problem(r, "bon/prm", Nmax)[0], per_problem(r, "bon/prm-mc", Nmax)[0]) for r in results]
        v, ci, ps = hier_bootstrap(arrs, _diff)
        verdict = "holds" if ci[1] < margin_ms else "does not hold" if ci[0] > margin_ms else "inconclusive"
        out.append(_finding(f"Math-Shepherd labels get within {margin_ms} of the oracle-label PRM (best-of-{Nmax})",
                            f"acc(bon/prm@{Nmax}) - acc(bon/prm-mc@{Nmax}) (the margin)", v, ci, ps, f"<{margin_ms}",
                            verdict))
    co = [compute_optimal(r) for r in results]
    common = [i for i in range(len(co[0])) if all(c[i]["reachable"] for c in co)]
    if common:
        i = common[-1]
        arrs = [(c[i]["fixed_test"][1], c[i]["adaptive_test"][1]) for c in co]
        v, ci, ps = hier_bootstrap(arrs, lambda f, a: f.mean() / a.mean())
        out.append(_finding(f"the compute-optimal strategy per k needs fewer tokens than the best single strategy "
                            f"(by more than {ratio_thr}x) at accuracy {co[0][i]['target']} (chosen on validation, "
                            f"read on test; learned verifiers only)",
                            "tokens(best single) / tokens(compute-optimal per k), tokens = generated + verifier",
                            v, ci, ps, f">{ratio_thr}", F.greater(ci, ratio_thr),
                            test_acc={"compute_optimal": _mean_acc(co, i, "adaptive_test"),
                                      "best_single": _mean_acc(co, i, "fixed_test")},
                            strategies=[{"per_k": c[i]["chosen"], "single": c[i]["fixed"]} for c in co]))
    else:
        out.append(dict(F.missing("9 search", "the compute-optimal strategy per k beats the best single strategy "
                                  "in tokens", "token ratio: no accuracy target reached at every k by a single "
                                  "strategy in every seed"), threshold=f">{ratio_thr}"))
    return out


METHOD_COLOR = {"greedy": "k", "majority": "#555555", "bon": "#4C72B0", "weighted": "#DD8452", "beam": "#55A868",
                "dvts": "#C44E52"}


VER_STYLE = {"prm": "-", "oracle": ":", "orm": "--", "prm-mc": "-.", None: "-"}


def curve(results: list[dict], name: str, x: str = "N", k: int | None = None):
    """Per N: x (N, mean FLOPs or tokens over seeds) and test accuracy mean and std over seeds."""
    Ns = sorted(int(n) for n in results[0]["strategies"][name]["test"])
    xs, m, s = [], [], []
    for N in Ns:
        per = [per_problem(r, name, N, k=k) for r in results]
        acc = [p[0].mean() for p in per]
        xv = {"N": N, "flops": np.mean([p[3].mean() for p in per]), "gen": np.mean([p[1].mean() for p in per]),
              "ver": np.mean([p[2].mean() for p in per])}[x]
        xs.append(xv)
        m.append(float(np.mean(acc)))
        s.append(float(np.std(acc, ddof=1)) if len(acc) > 1 else 0.0)
    return np.array(xs), np.array(m), np.array(s)


def plot_curves(results: list[dict], path: str, x: str = "N") -> str:
    """Test accuracy against N (or FLOPs) for every strategy; one panel for all k, then one per k; band = ± std
    over seeds; grey: chance (0.1)."""
    ks = sorted(set(results[0]["k"]["test"]))
    panels = [None] + ks
    cols = 4
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), sharey=True, squeeze=False)
    fig.subplots_adjust(hspace=0.4)
    names = list(results[0]["strategies"])
    for ax, k in zip(axes.flat, panels):
        for name in names:
            meth, _, ver = name.partition("/")
            xs, m, s = curve(results, name, x, k)
            if name == "greedy":
                ax.axhline(m[0], color="k", lw=1, label="greedy")
                continue
            line, = ax.plot(xs, m, ls=VER_STYLE.get(ver or None, "-"), color=METHOD_COLOR[meth], marker="o", ms=2,
                            label=name)
            ax.fill_between(xs, m - s, m + s, color=line.get_color(), alpha=0.12)
        ax.axhline(0.1, color="grey", ls=":", lw=1, label="chance (0.1)")
        log_x(ax, 2 if x == "N" else 10)
        ax.set_title("all k" if k is None else f"k = {k}", fontsize=9)
        ax.set_xlabel({"N": "N (samples / beams)", "flops": "FLOPs per problem (generator + verifier)"}[x], fontsize=8)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    axes[0, 0].set_ylabel("test accuracy")
    axes[0, 0].legend(fontsize=5.5, ncol=2, loc="lower right")
    r0 = results[0]["config"]
    fig.suptitle(f"{r0['thinker']} thinker, forced {r0['force']}, M = {r0['width']}, {len(results)} seed(s); "
                 f"solid: learned PRM, dotted: oracle, dashed: ORM, dash-dot: Math-Shepherd PRM", fontsize=9)
    return save(fig, path)


def plot_tokens(results: list[dict], path: str) -> str:
    """All k: test accuracy against generated tokens and against verifier tokens per problem."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    for ax, x in zip(axes, ("gen", "ver")):
        for name in results[0]["strategies"]:
            meth, _, ver = name.partition("/")
            if x == "ver" and not ver:
                continue
            xs, m, _ = curve(results, name, x)
            ax.plot(np.maximum(xs, 1), m, ls=VER_STYLE.get(ver or None, "-"), color=METHOD_COLOR[meth], marker="o",
                    ms=2, label=name)
        ax.axhline(0.1, color="grey", ls=":", lw=1)
        log_x(ax)
        ax.set_xlabel({"gen": "generated tokens per problem", "ver": "verifier tokens per problem"}[x])
    axes[0].set_ylabel("test accuracy (all k)")
    axes[1].legend(fontsize=6, ncol=2)
    return save(fig, path)


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


def findings_table(fs: list[dict]) -> str:
    rows = ["| claim | statistic | value [95 % CI] | per seed | threshold | verdict |", "|---|---|---|---|---|---|"]
    for f in fs:
        val = "—" if f["value"] is None else f"{f['value']:.3f} [{f['ci95'][0]:.3f}, {f['ci95'][1]:.3f}]"
        extra = "; ".join(f"{k.replace('_', ' ')} {v['value']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]"
                          for k, v in f.items() if isinstance(v, dict) and "ci95" in v)
        if "test_acc" in f:
            extra = f"test accuracy: compute-optimal {f['test_acc']['compute_optimal']:.3f}, best single " \
                    f"{f['test_acc']['best_single']:.3f} ({f['strategies'][0]['single']})"
        rows.append(f"| {f['claim']}{' (' + extra + ')' if extra else ''} | {f['statistic']} | {val} | "
                    f"{', '.join(f'{v:.3f}' for v in f['per_seed'])} | {f['threshold']} | **{f['verdict']}** |")
    return "\n".join(rows)


def page(results: list[dict], out: str, prefix: str = "", fs: list[dict] | None = None) -> str:
    """Plots (acc_vs_n.png, acc_vs_compute.png, tokens.png), the tables and the findings, as a markdown section
    whose pictures are linked as prefix + file name (the lab: "search/"); also writes out/findings.json and
    out/section.md."""
    plot_curves(results, os.path.join(out, "acc_vs_n.png"), "N")
    plot_curves(results, os.path.join(out, "acc_vs_compute.png"), "flops")
    plot_tokens(results, os.path.join(out, "tokens.png"))
    fs = findings(results) if fs is None else fs
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

{P} test problems ({c['n_test']} per k) and {c['n_val']} validation problems per k, both from the quarter of
problem space no verifier trains on; the {c['thinker']} thinker writes forced {c['force']} chains at temperature
{c['temperature']}; seeds {', '.join(str(r['seed']) for r in results)} (mean ± std over seeds). Best-of-N and
weighted vote score finished outputs with `{c['agg']}` of the step scores; beam search (N/M beams, M = {c['width']})
and DVTS (N/M subtrees) rank partial chains by the `{c['step_agg']}` step score. Compute: generated tokens include
the forced format token; verifier tokens = prompt + output per scored sequence, every expansion re-read;
FLOPs = 2 · P_gen · (prompt + generated) + 2 · P_ver · verifier tokens. Chance is 0.1.

**Findings** (95 % intervals: two-level bootstrap, seeds then test problems; verdicts computed from them):

{findings_table(fs)}

*Papers:* Lightman et al. 2023 (arXiv 2305.20050); Snell et al. 2024 (arXiv 2408.03314); Math-Shepherd (Wang et
al. 2023, arXiv 2312.08935); Gao et al. 2022 (arXiv 2210.10760); HF search-and-learn (beam search, DVTS).
*Explore:* `reasonlab search --method beam dvts --width 2`, `--agg prod`, `--thinker base` (the contrast).
"""
    write_text(os.path.join(out, "section.md"), md)
    return md


def headline(results: list[dict], fs: list[dict] | None = None) -> str:
    """One line for the lab's summary table, computed from the findings (`fs`: findings(results), if computed)."""
    fs = findings(results) if fs is None else fs
    nmax = max(int(n) for n in results[0]["strategies"]["majority"]["test"])
    acc = {n: np.mean([per_problem(r, n, nmax if n != "greedy" else 1)[0].mean() for r in results])
           for n in ("greedy", "majority", "weighted/prm", "bon/oracle") if cell(results[0], n, 1)}
    held = sum(f["verdict"] == "holds" for f in fs)
    return (", ".join(f"{n} {v:.3f}" for n, v in acc.items()) + f" (N = {nmax}); {held}/{len(fs)} findings hold")


register(Experiment("search", Config, run, claims, render, depends=depends, keys=("verifiers", "search"), run_cost=52, render_cost=6.1,
                    quick=Config(n_test=4, n_val=3, n_max=4, quick_verifiers=True, thinker="quick")))
