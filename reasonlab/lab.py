"""The lab: one command walks the lecture's path and writes a report.

base model -> think longer (forced formats, budgets) -> sample and vote -> verifiers and the compute frontier ->
STaR -> GRPO against the spec's REINFORCE (and Dr. GRPO) -> adaptive thinking. Every experiment runs once per seed
and writes its numbers to <out>/<experiment>/seed<s>.json next to its plots; a finished (experiment, seed) whose
settings are unchanged is read back instead of rerun, so an interrupted lab resumes where it stopped. The
report (report.md, report.html) is rebuilt from those files at the end.
"""
from __future__ import annotations

import copy
import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from . import adaptive, report, search, star, tts
from .report import jget, pm
from .checkpoint import CACHE_VERSION, cache_key, fingerprint, get_model, write_json
from .evaluate import eval_table, evaluate, problems_per_k
from .model import GPT
from .rl import ALGOS, RLConfig, train
from .train import BASE_CFG

EXPERIMENTS = ("base", "budgets", "sampling", "star", "rl", "adaptive", "search")


@dataclass
class Sizes:
    """How big each experiment is. `LabConfig.quick` swaps in QUICK."""
    eval_n: int = 500
    """greedy evaluation problems per k (base model, RL's final evaluation)"""
    budget_n: int = 200
    """problems per k for the budget-forcing sweep"""
    tts_n: int = 500
    """problems per k in the sampling grid"""
    tts_n_max: int = 32
    """samples per problem in the sampling grid (N = 1, 2, 4, ... up to this)"""
    star_rounds: int = 2
    """STaR rounds"""
    star_problems: int = 5000
    """fresh problems per STaR round"""
    star_steps: int = 300
    """STaR fine-tuning steps in round 1"""
    rl_steps: int = 60
    """RL steps per run (GRPO solves the task in ~12, the spec's REINFORCE in ~43)"""
    rl_algos: tuple[str, ...] = ("grpo", "reinforce", "dr_grpo")
    """RL algorithms compared"""
    rl_eval_every: int = 5
    """greedy evaluation every N RL steps, for time-to-solve"""
    adaptive_steps: int = 200
    """RL steps per adaptive-thinking run"""
    adaptive_methods: tuple[str, ...] = ("thinkless_fmt",)
    """adaptive-thinking rewards compared (see adaptive.METHODS)"""
    adaptive_eval_n: int = 300
    """greedy evaluation problems per k for adaptive thinking"""
    search_n_test: int = 100
    """verifiers and search: test problems per k"""
    search_n_val: int = 50
    """verifiers and search: validation problems per k (compute-optimal selection)"""
    search_n_max: int = 64
    """verifiers and search: largest N"""
    search_quick_verifiers: bool = False
    """verifiers and search: tiny verifiers (quick mode)"""


QUICK = Sizes(eval_n=40, budget_n=30, tts_n=40, tts_n_max=8, star_rounds=1, star_problems=400, star_steps=40,
              rl_steps=4, rl_eval_every=2, adaptive_steps=4, adaptive_methods=("thinkless_fmt",), adaptive_eval_n=30,
              search_n_test=4, search_n_val=3, search_n_max=4, search_quick_verifiers=True)


def quick_base_cfg(seed: int) -> dict:
    """The base recipe at half its steps (900): learns T (0.99 on seed 0), S partly (0.67), in ~30 s."""
    cfg = json.loads(json.dumps(BASE_CFG))
    for ph in cfg["phases"]:
        ph[1], ph[2] = ph[1] // 2, min(ph[2], ph[1] // 2)
    return dict(cfg, seed=seed)


@dataclass
class LabConfig:
    seeds: tuple[int, ...] = (0, 1, 2)
    """base-model seeds; every experiment runs once per seed and reports mean ± std over them"""
    quick: bool = False
    """smoke-test sizes (QUICK) and a small base model: checks the pipeline, the numbers mean nothing"""
    out: str = "runs/lab"
    """run directory: one folder per experiment, report.md and report.html"""
    cache: str | None = None
    """model cache (default $REASONLAB_CACHE or ~/.cache/reasonlab)"""
    device: str = "cpu"
    """cpu or cuda"""
    fresh: bool = False
    """rerun every experiment even where a finished result with the same settings exists"""
    only: tuple[str, ...] = EXPERIMENTS
    """the experiments to run (the report covers those that have results)"""
    sizes: Sizes = field(default_factory=Sizes)
    """set from `quick` unless given"""

    def validate(self) -> None:
        bad = [e for e in self.only if e not in EXPERIMENTS]
        if bad:
            raise ValueError(f"unknown experiment {bad[0]!r}: choose from {', '.join(EXPERIMENTS)}")
        if not self.seeds:
            raise ValueError("the lab needs at least one seed")
        for m in self.sizes.adaptive_methods:
            if m not in adaptive.METHODS:
                raise ValueError(f"unknown adaptive method {m!r}: choose from {', '.join(adaptive.METHODS)}")


# ---------------------------------------------------------------------------------------------------------------
# One function per experiment and seed: (base model, sizes, seed, out dir) -> a JSON-able result.

def exp_base(model: GPT, S: Sizes, seed: int, cfg: LabConfig) -> dict:
    table = eval_table(model, S.eval_n)
    return {c: {"acc": t["acc"], "length": t["length"], "share": t["share"],
                "acc_by_k": {k: v["acc"] for k, v in t["per_k"].items()}} for c, t in table.items()}


def exp_budgets(model: GPT, S: Sizes, seed: int, cfg: LabConfig) -> dict:
    probs = problems_per_k(S.budget_n, seed=seed + 1)
    return {"budgets": (tts.budget_sweep(model, probs, "T", range(0, 9)) + tts.budget_sweep(model, probs, "S", range(0, 5))
                        + tts.budget_sweep(model, probs, "T", range(9, 13), kind="min"))}


def exp_sampling(model: GPT, S: Sizes, seed: int, cfg: LabConfig) -> dict:
    return tts.run(model, n_per_k=S.tts_n, n_max=S.tts_n_max, formats=("A", "S", "T"), seed=seed, budgets=False, log=None)


def exp_star(model: GPT, S: Sizes, seed: int, cfg: LabConfig) -> dict:
    sc = star.StarConfig(rounds=S.star_rounds, problems=S.star_problems, steps=S.star_steps, seed=seed)
    return {"main": star.run(model, base_name(seed, cfg.quick), sc, log=None, cache=cfg.cache, progress=True)}


def rl_run(base: GPT, algo: str, seed: int, steps: int, every: int, eval_n: int = 500, probe_n: int = 100,
           lr: float | None = None, progress: bool = False) -> dict:
    """One RL run from `base` with the spec's defaults for `algo`: greedy accuracy on a probe set every `every`
    steps (time-to-solve = first probe at >= 0.99; seconds count training only) and a final evaluation."""
    policy = copy.deepcopy(base)
    cfg = RLConfig.preset(algo, steps=steps, seed=seed, log_every=0, **({"learning_rate": lr} if lr else {}))
    probe = problems_per_k(probe_n, seed=999)
    state = {"eval_s": 0.0, "solved": None, "curve": []}
    t0 = time.perf_counter()

    def check(step, model):
        t = time.perf_counter()
        r = evaluate(model, probe)
        state["curve"].append({"step": step, "acc": r["acc"], "length": r["length"], "share": r["share"]})
        if state["solved"] is None and r["acc"] >= 0.99:
            state["solved"] = {"step": step, "seconds": round(t - t0 - state["eval_s"], 1)}
        state["eval_s"] += time.perf_counter() - t

    # the reference is always passed so KL is logged; with beta = 0 (REINFORCE) it does not enter the loss
    hist = train(policy, copy.deepcopy(base), cfg, callback=check, every=every, log=None, progress=progress)
    train_s = time.perf_counter() - t0 - state["eval_s"]
    probs = problems_per_k(eval_n, seed=12345)
    final, start = evaluate(policy, probs), evaluate(base, probs)
    tail = hist[-10:]
    sampled = {key: float(np.mean([h[key] for h in tail])) for key in ("acc", "length", "kl_exact", "entropy")}
    sampled["direct"] = float(np.mean([h["share"]["direct"] for h in tail]))
    return {"algo": algo, "seed": seed, "steps": steps, "train_s": round(train_s, 1), "solved": state["solved"],
            "sampled_last10": sampled, "base_acc": start["acc"], "acc": final["acc"], "share": final["share"],
            "length": final["length"], "acc_by_k": {k: v["acc"] for k, v in final["per_k"].items()},
            "share_by_k": {k: v["share"] for k, v in final["per_k"].items()}, "curve": state["curve"], "hist": hist}


def exp_rl(model: GPT, S: Sizes, seed: int, cfg: LabConfig) -> dict:
    return {a: rl_run(model, a, seed, S.rl_steps, S.rl_eval_every, S.eval_n, progress=True) for a in S.rl_algos}


def exp_adaptive(model: GPT, S: Sizes, seed: int, cfg: LabConfig) -> dict:
    ref_acc = adaptive.reference_accuracy(model)
    runs = [adaptive.run_method(model, m, seed, steps=S.adaptive_steps, n_eval=S.adaptive_eval_n, ref_acc=ref_acc,
                                progress=True)
            for m in S.adaptive_methods]
    return {"runs": runs, "fixed": adaptive.fixed_points([model], S.adaptive_eval_n), "tts": adaptive.tts_points(model)}


def exp_search(model: GPT, S: Sizes, seed: int, cfg: LabConfig) -> dict:
    """Issue 17: learned verifiers' quality, then search with them, on the erring thinker (quick: the quick base)."""
    from . import verifier
    sc = search.SearchConfig(thinker="quick" if cfg.quick else "erring", n_test=S.search_n_test, n_val=S.search_n_val,
                             n_max=S.search_n_max, quick_verifiers=S.search_quick_verifiers)
    thinker = search.thinker_model(sc.thinker, seed, cfg.cache, cfg.device)
    vcfg = search.verifier_config(sc)
    quality = {"seed": seed, "thinker": sc.thinker, "kinds": {}}
    for kind in sc.verifiers:          # verifier.run's measurement, on this thinker (quick mode has its own)
        v = verifier.train_verifier(kind, thinker, seed, vcfg, cache=cfg.cache, log=None)
        q = verifier.verifier_quality(v, thinker, seed, S.search_n_test, vcfg)
        quality["kinds"][kind] = {**q, "train": {k: v.meta[k] for k in ("seconds", "n_outputs", "n_steps",
                                                                        "positive_share", "loss_first", "loss_last")}}
    return {"verifiers": quality, "search": search.run(sc, seed, cache=cfg.cache, device=cfg.device, log=None)}


RUNNERS: dict[str, Callable] = {"base": exp_base, "budgets": exp_budgets, "sampling": exp_sampling, "star": exp_star,
                                "rl": exp_rl, "adaptive": exp_adaptive, "search": exp_search}


# ---------------------------------------------------------------------------------------------------------------

def base_name(seed: int, quick: bool) -> str:
    return f"lab-quick-seed{seed}" if quick else f"base-seed{seed}"


def base_cfg(seed: int, quick: bool) -> dict:
    return quick_base_cfg(seed) if quick else dict(BASE_CFG, seed=seed)


SIZE_PREFIX = {"base": "eval_", "budgets": "budget_", "sampling": "tts_", "star": "star_", "rl": "rl_",
               "adaptive": "adaptive_", "search": "search_"}   # the Sizes fields each experiment depends on


def unit_key(exp: str, seed: int, cfg: LabConfig) -> str:
    """What decides whether a finished result can be reused: the experiment's sizes, the base model's recipe, the
    package version."""
    from . import __version__
    sizes = {f: v for f, v in asdict(cfg.sizes).items() if f.startswith(SIZE_PREFIX[exp]) or (exp == "rl" and f == "eval_n")}
    return fingerprint({"exp": exp, "seed": seed, "sizes": sizes, "base": cache_key(base_cfg(seed, cfg.quick)),
                        "version": __version__, "cache_version": CACHE_VERSION})


def run(cfg: LabConfig, log: Callable = print) -> dict:
    """Run (or reuse) every experiment for every seed, then write the report. Returns {experiment: [per-seed results]}."""
    cfg.validate()
    os.makedirs(cfg.out, exist_ok=True)
    write_json(os.path.join(cfg.out, "config.json"), asdict(cfg))
    t_lab = time.perf_counter()
    bases: dict[int, GPT] = {}
    timing: dict[str, float] = {}
    for i, exp in enumerate(cfg.only):
        for seed in cfg.seeds:
            path = os.path.join(cfg.out, exp, f"seed{seed}.json")
            key = unit_key(exp, seed, cfg)
            if not cfg.fresh and os.path.exists(path):
                try:
                    with open(path) as f:
                        if json.load(f).get("key") == key:
                            log(f"[{i + 1}/{len(cfg.only)}] {exp}, seed {seed}: finished earlier, reused ({path})")
                            continue
                except (OSError, ValueError):
                    pass                                   # unreadable: rerun it
            if seed not in bases:
                t = time.perf_counter()
                bases[seed] = get_model(base_name(seed, cfg.quick), base_cfg(seed, cfg.quick), cache=cfg.cache,
                                        device=cfg.device, progress=True, log=log)
                timing["base models"] = round(timing.get("base models", 0.0) + time.perf_counter() - t, 1)
            log(f"[{i + 1}/{len(cfg.only)}] {exp}, seed {seed} ...")
            t = time.perf_counter()
            res = RUNNERS[exp](bases[seed], cfg.sizes, seed, cfg)
            secs = time.perf_counter() - t
            timing[f"{exp}/seed{seed}"] = round(secs, 1)
            write_json(path, {"key": key, "seconds": round(secs, 1), "result": res})
            log(f"    done in {secs:.1f}s")
    results = load_results(cfg.out, cfg.seeds)
    wall = time.perf_counter() - t_lab
    meta = {"seeds": list(cfg.seeds), "quick": cfg.quick, "wall_s": round(wall, 1), "ran": timing}
    write_json(os.path.join(cfg.out, "timing.json"), meta)
    paths = write_report(cfg.out, results, meta)
    log(f"lab finished in {wall:.0f}s; report: {paths['html']} and {paths['md']}")
    return results


def load_results(out: str, seeds) -> dict:
    """{experiment: {"results": [per-seed results], "seconds": [...]}} for every experiment with a result per seed."""
    res = {}
    for exp in EXPERIMENTS:
        files = [os.path.join(out, exp, f"seed{s}.json") for s in seeds]
        if all(os.path.exists(p) for p in files):
            recs = []
            for p in files:
                with open(p) as f:
                    recs.append(json.load(f))
            res[exp] = {"results": [r["result"] for r in recs], "seconds": [r["seconds"] for r in recs]}
    return res


# ---------------------------------------------------------------------------------------------------------------
# The report: one markdown section per experiment (question, picture, numbers, paper, what to try next), rendered to
# report.md and a self-contained report.html.

def section_base(rs: list[dict], out: str) -> tuple[str, str]:
    report.plot_lab_base(rs, os.path.join(out, "base", "accuracy_by_k.png"))
    rows = ["| generation | accuracy (k = 2..8) | worst k | mean tokens | free share A / S / T |", "|---|---|---|---|---|"]
    for c in ("free", "A", "S", "T"):
        share = " / ".join(pm([r[c]["share"][f] for r in rs], "{:.2f}") for f in ("direct", "short", "full")) if c == "free" else ""
        rows.append(f"| {'free (the model picks)' if c == 'free' else 'forced ' + c} | {pm([r[c]['acc'] for r in rs])} | "
                    f"{pm([min(r[c]['acc_by_k'].values()) for r in rs])} | {pm([r[c]['length'] for r in rs], '{:.2f}')} | {share} |")
    head = (f"forced S {pm([r['S']['acc'] for r in rs])}, forced T {pm([r['T']['acc'] for r in rs])}, "
            f"direct A {pm([r['A']['acc'] for r in rs])} (chance 0.1)")
    md = f"""## 1. The base model: does writing a chain help?

> **Question.** A 200K-parameter GPT is pre-trained on a mix of direct answers (A), short chains (S) and full
> chains (T). How accurate is each format, and which does the model choose on its own?

![accuracy per k](base/accuracy_by_k.png)

{chr(10).join(rows)}

Greedy decoding, problems drawn fresh per k; mean ± std over seeds. A direct answer is a lookup of k digits at
once and fails beyond k = 2; a chain turns the sum into k small steps it can do. Yet free generation picks A,
because A was half of the pre-training mix: the model has to learn *when* to think (sections 5–7).

*Papers:* chain of thought (Wei et al. 2022, arXiv 2201.11903); scratchpads (Nye et al. 2021, arXiv 2112.00114).
*Explore:* `reasonlab pretrain --recipe spec` trains the course module's recipe; change the mix in `BASE_CFG`.
"""
    return md, head


def section_budgets(rs: list[dict], out: str) -> tuple[str, str]:
    keys = [(b["format"], b["kind"], b["budget"]) for b in rs[0]["budgets"]]
    avg = []
    for i, key in enumerate(keys):
        acc = [r["budgets"][i]["acc"] for r in rs]
        m, s = report.mean_std(acc)
        avg.append({"format": key[0], "kind": key[1], "budget": key[2], "acc": m, "lo": m - s, "hi": m + s,
                    "thinking_tokens": float(np.mean([r["budgets"][i]["thinking_tokens"] for r in rs])),
                    "tokens": float(np.mean([r["budgets"][i]["tokens"] for r in rs]))})
    report.plot_budgets({"budgets": avg}, os.path.join(out, "budgets", "budgets.png"))
    rows = ["| format | chain budget | chain steps written | accuracy |", "|---|---|---|---|"]
    for i, b in enumerate(avg):
        rows.append(f"| {b['format']} | {'at most' if b['kind'] == 'max' else 'at least'} {b['budget']} | "
                    f"{b['thinking_tokens']:.2f} | {pm([r['budgets'][i]['acc'] for r in rs])} |")
    t = [b for b in avg if b["format"] == "T" and b["kind"] == "max"]
    head = f"T capped at 0 steps {t[0]['acc']:.2f} → {t[-1]['budget']} steps {t[-1]['acc']:.2f}"
    md = f"""## 2. Thinking longer: forced formats and thinking budgets

> **Question.** If we force the model to think for at most (or at least) b chain steps, how does accuracy follow
> the thinking budget?

![budget forcing](budgets/budgets.png)

{chr(10).join(rows)}

Greedy decoding; "at most b": once the chain has b running sums the answer marker is forced (s1's budget cap);
"at least b": the end of the chain is suppressed until b sums are written (s1's "Wait"). Error bars: ± std over
seeds. Capping buys accuracy step by step; forcing the chain past its natural end does not help this model: it
was never trained to keep going, so the extra steps are noise (a negative result, `docs/LOG.md`).

*Paper:* s1: simple test-time scaling (Muennighoff et al. 2025, arXiv 2501.19393).
*Explore:* `tts.budget_hook(max_chain=b)` on any generation; `reasonlab tts` for the full sweep.
"""
    return md, head


def section_sampling(rs: list[dict], out: str) -> tuple[str, str]:
    report.plot_tts_vs_n(rs[0], os.path.join(out, "sampling", "acc_vs_n.png"))
    n = rs[0]["n_max"]
    rows = ["| format | greedy | maj@1 | maj@8 | maj@" + str(n) + " | pass@" + str(n) + " (oracle) | tokens@" + str(n) + " |",
            "|---|---|---|---|---|---|---|"]
    for f in rs[0]["formats"]:
        def acc(m, N):
            return [jget(r["curves"][f][m], N)["acc"] for r in rs]
        rows.append(f"| {f} | {pm([r['curves'][f]['greedy']['acc'] for r in rs])} | {pm(acc('maj', 1))} | "
                    f"{pm(acc('maj', min(8, n)))} | {pm(acc('maj', n))} | {pm(acc('pass', n))} | "
                    f"{np.mean([jget(r['curves'][f]['tokens'], n) for r in rs]):.0f} |")
    rows.append(f"| chance | 0.100 | 0.100 | 0.100 | 0.100 | {1 - 0.9 ** n:.3f} | |")
    a_maj = pm([jget(r["curves"]["A"]["maj"], n)["acc"] for r in rs])
    head = f"A maj@{n} {a_maj} vs greedy A {pm([r['curves']['A']['greedy']['acc'] for r in rs])}"
    md = f"""## 3. Sampling more: voting

> **Question.** Instead of thinking, sample N direct answers and take the majority. Does voting buy what a chain
> buys?

![accuracy against N](sampling/acc_vs_n.png)

{chr(10).join(rows)}

{rs[0]['n_per_k']} problems per k, N up to {n} samples at temperature 1, mean ± std over seeds (the picture: first
seed, 95 % bootstrap bands over problems; grey: chance for one answer and for pass@N, 1 − 0.9^N). Voting over
direct answers stays near the greedy answer: the samples share the model's systematic error, so the majority is
the same wrong answer. pass@N climbs, but no faster than guessing would; only thinking (S, T) fixes the answer.

*Papers:* self-consistency (Wang et al. 2022, arXiv 2203.11171); pass@k (Chen et al. 2021, arXiv 2107.03374);
repeated sampling (Brown et al. 2024, arXiv 2407.21787).
*Explore:* `reasonlab tts --formats A free --n-max 64`, or a probability-weighted vote (`tts.weighted_vote`).
"""
    return md, head


def section_verifiers(rs: list[dict], out: str) -> tuple[str, str]:
    report.plot_tts_frontier(rs[0], os.path.join(out, "sampling", "frontier.png"))
    n = rs[0]["n_max"]
    rows = [f"| format | maj@{n} | best-of-{n}, process verifier | verified pass@{n} |", "|---|---|---|---|"]
    for f in rs[0]["formats"]:
        rows.append(f"| {f} | " + " | ".join(pm([jget(r["curves"][f][m], n)["acc"] for r in rs])
                                             for m in ("maj", "verifier", "verified_pass")) + " |")
    trows = ["| target accuracy | compute-optimal per k: tokens | best fixed strategy: tokens | fixed / optimal |", "|---|---|---|---|"]
    head = ""
    for i, t in enumerate(rs[0]["frontier"]["targets"]):
        ts = [r["frontier"]["targets"][i] for r in rs]
        if all(x.get("reachable") for x in ts):
            trows.append(f"| {t['target']} | {pm([x['adaptive']['tokens'] for x in ts], '{:.2f}')} | "
                         f"{pm([x['fixed']['tokens'] for x in ts], '{:.2f}')} | {pm([x['ratio'] for x in ts], '{:.2f}')}× |")
            head = f"compute-optimal per k uses {pm([x['ratio'] for x in ts], '{:.2f}')}× fewer tokens at {t['target']}"
    md = f"""## 4. Verifiers and the compute-optimal frontier

> **Question.** Every chain step can be checked (a process verifier). Does picking a verified sample beat the
> vote, and what is the cheapest strategy for each difficulty?

![accuracy against tokens](sampling/frontier.png)

{chr(10).join(rows)}

{chr(10).join(trows)}

A direct answer has no chain, so the verifier can't help it; with chains, a verified sample is right whenever one
exists. The frontier picks, per k and on a validation half, the cheapest (format, selection, N) reaching each
target, and compares its tokens on the test half with the best single strategy for all k. Mean ± std over seeds.

*Papers:* Let's verify step by step (Lightman et al. 2023, arXiv 2305.20050); compute-optimal test-time scaling
(Snell et al. 2024, arXiv 2408.03314).
*Explore:* `tts.frontier(pools)` with your own targets, or `reasonlab tts --formats A S T free`.
"""
    return md, head


def section_star(rs: list[dict], out: str) -> tuple[str, str]:
    hists = [r["main"] for r in rs]
    report.plot_star({"main": hists}, os.path.join(out, "star", "star.png"))
    head = f"free accuracy {pm([h[0]['free'] for h in hists])} → {pm([h[-1]['free'] for h in hists])} in {len(hists[0]) - 1} round(s)"
    md = f"""## 5. STaR: the model teaches itself to think

> **Question.** Sample from the model, keep the outputs with the right answer, fine-tune the base on them, repeat.
> Does free-format accuracy rise as the kept data favour the chains that are right?

![STaR rounds](star/star.png)

{report.star_table({"main": hists})}

4 samples per problem at temperature 1, answer filter, each round fine-tuned from the base model; mean ± std over
seeds. Direct answers are right a third of the time, chains almost always, so the kept data are mostly chains and
the fine-tuned model thinks. "Right answer, wrong chain" is STaR's false positive, exactly measurable here.

*Papers:* STaR (Zelikman et al. 2022, arXiv 2203.14465); RFT (Yuan et al. 2023, arXiv 2308.01825); ReST-EM (Singh
et al. 2023, arXiv 2312.06585).
*Explore:* `reasonlab star --ablations` (greedy single sample, chain filter, continue, pooling).
"""
    return md, head


def section_rl(rs: list[dict], out: str) -> tuple[str, str]:
    algos = [a for a in ALGOS if a in rs[0]]
    runs = [r[a] for a in algos for r in rs]
    report.plot_rl_runs({a: [r[a]["hist"] for r in rs] for a in algos}, os.path.join(out, "rl", "curves.png"),
                        "RL from the base model (mean over seeds; band = min..max)")
    report.plot_format_share(rs[0][algos[0]]["hist"], os.path.join(out, "rl", f"formats_{algos[0]}.png"),
                             f"{algos[0]}, first seed")
    def solved(a):
        st = [r[a]["solved"]["step"] for r in rs if r[a]["solved"]]
        steps = rs[0][a]["steps"]
        return (f"{a} reaches 0.99 in {pm(st, '{:.0f}')} steps ({len(st)}/{len(rs)} seeds)" if st
                else f"{a} not at 0.99 within {steps} steps")
    head = "; ".join(solved(a) for a in algos)
    md = f"""## 6. RL from a rule reward: GRPO against the spec's REINFORCE

> **Question.** Reward only the right answer (plus a format bonus). Does RL move the model from answering directly
> to thinking, and does the baseline matter?

![RL curves](rl/curves.png)

![format share](rl/formats_{algos[0]}.png)

{report.rl_table(runs)}

16 problems × 8 samples per step, the spec's settings (lr 3e-5, β 0.04, clip 0.2, 2 inner updates); time-to-solve
is the first greedy probe (100 problems per k) at ≥ 0.99. GRPO's group baseline separates right from wrong within
a problem; REINFORCE without a baseline pushes up every sampled answer, right or wrong, and needs more steps.

*Papers:* GRPO (Shao et al. 2024, arXiv 2402.03300); DeepSeek-R1 (2025, arXiv 2501.12948); Dr. GRPO (Liu et al.
2025, arXiv 2503.20783); REINFORCE (Williams 1992).
*Explore:* `reasonlab rl --algo dapo` (or rloo, gspo, reinforce_baseline), `--kl-estimator exact`, `--beta 0`.
"""
    return md, head


def section_adaptive(rs: list[dict], out: str) -> tuple[str, str]:
    runs = [x for r in rs for x in r["runs"]]
    fixed = adaptive.mean_points([r["fixed"] for r in rs])
    summary = {"methods": adaptive.summarize(runs, fixed), "fixed": fixed, "tts": rs[0]["tts"],
               "seeds": sorted({x["seed"] for x in runs})}
    report.plot_adaptive_heatmap(summary, os.path.join(out, "adaptive", "heatmap.png"))
    report.plot_adaptive_frontier(summary, os.path.join(out, "adaptive", "frontier.png"))
    best = max(summary["methods"], key=lambda m: (summary["methods"][m]["acc"][0], -summary["methods"][m]["tokens"][0]))
    b = summary["methods"][best]
    head = (f"{best}: accuracy {b['acc'][0]:.3f} ± {b['acc'][1]:.3f} at {b['tokens'][0]:.2f} tokens "
            f"(always S {fixed['S']['acc']:.3f} at {fixed['S']['tokens']:.2f})")
    md = f"""## 7. Adaptive thinking: when does thinking pay?

> **Question.** Make thinking cost something in the reward. Does the model learn to answer directly where that is
> reliable and think where it must, and does that beat every fixed format?

![format by k](adaptive/heatmap.png)

![accuracy against tokens](adaptive/frontier.png)

{report.adaptive_table(summary)}

GRPO with Thinkless's per-format reward; half of each group is forced to answer directly so that A keeps being
tried, and those rollouts train only that choice (`thinkless_fmt`); mean ± std over seeds. The simplest policy
that loses nothing answers k = 2 directly (always right) and thinks from k = 3 on.

*Papers:* Thinkless (Fang et al. 2025, arXiv 2505.13379); AdaptThink (Zhang et al. 2025, arXiv 2505.13417);
length penalties (Arora & Zanette 2025, arXiv 2502.04463); Kimi k1.5 (arXiv 2501.12599).
*Explore:* `reasonlab adaptive --methods grpo cost0.3 cost0.6 kimi thinkless thinkless_fmt arm adaptthink`.
"""
    return md, head


def section_learned_verifiers(rs: list[dict], out: str) -> tuple[str, str]:
    from . import verifier
    q = [r["verifiers"] for r in rs]
    md = verifier.render(q, out)        # writes out/verifier_quality.png, linked from report.md beside it
    head = ", ".join(f"{k} step AUROC {pm([x['kinds'][k]['step_auroc'] for x in q])}" for k in q[0]["kinds"])
    return md, head


def section_search(rs: list[dict], out: str) -> tuple[str, str]:
    res = [r["search"] for r in rs]
    return search.render(res, os.path.join(out, "search"), prefix="search/"), search.headline(res)


SECTIONS = {"base": [section_base], "budgets": [section_budgets], "sampling": [section_sampling, section_verifiers],
            "star": [section_star], "rl": [section_rl], "adaptive": [section_adaptive],
            "search": [section_learned_verifiers, section_search]}


def write_report(out: str, results: dict, meta: dict) -> dict:
    """Build every section with results, the headline table on top; write report.md and report.html."""
    parts, heads = [], []
    for exp, builders in SECTIONS.items():
        if exp not in results:
            continue
        for b in builders:
            md, head = b(results[exp]["results"], out)
            parts.append(md)
            heads.append(f"| {md.splitlines()[0][3:]} | {head} | {sum(results[exp]['seconds']):.0f} s |")
    seeds = ", ".join(map(str, meta["seeds"]))
    quick = ("\n**Quick mode**: a small base model and tiny experiments that check the pipeline; the numbers are not "
             "results.\n" if meta["quick"] else "")
    top = f"""# reasonlab: the lab report

A 200K-parameter GPT learns "sum of k digits mod 10" (k = 2..8) and chooses how long to think: answer at once
(A), a short chain (S) or a full chain (T). Seeds {seeds}; mean ± std over seeds unless a line says otherwise;
chance is 0.1 for any single answer. Lab wall time {meta['wall_s']:.0f} s, of which
{meta.get('ran', {}).get('base models', 0.0):.0f} s loading or training the base models (experiments reused from an
earlier run count their original time in the table).{quick}

| experiment | headline | compute time |
|---|---|---|
{chr(10).join(heads)}
"""
    return report.write_report(out, top + "\n" + "\n".join(parts), "reasonlab lab report")
