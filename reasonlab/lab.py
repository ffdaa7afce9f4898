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
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Literal, NamedTuple

import numpy as np

from . import adaptive, budget, findings, report, search, star, tts
from .report import load_json, pm
from .checkpoint import CACHE_VERSION, cache_dir, cache_key, fingerprint, write_json
from .executor import ExecConfig, Unit, UnitsFailed, cached_model, model_in_cache, run_units
from .evaluate import PROBE_SEED, TEST_SEED, eval_table, evaluate, problems_per_k
from .model import GPT
from .rl import ALGOS, RLConfig, every_n_steps, train
from .task import FMT_NAMES
from .train import base_cfg, base_name, thinker_model

EXPERIMENTS = ("base", "budgets", "sampling", "star", "rl", "adaptive", "l1", "search")
LONGEST_FIRST = ("search", "star", "l1", "rl", "sampling", "adaptive", "budgets", "base")
"""The order units are handed to workers: longest first (results/lab/timing.json), so that no long unit starts
last while the other workers idle. Results do not depend on it."""


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
    star_eval_n: int = 300
    """greedy test problems per k for each STaR round's evaluation"""
    star_filters: tuple[str, ...] = ("answer", "chain")
    """STaR filters compared, each its own run ("main" is the answer filter)"""
    rl_steps: int = 60
    """RL steps per run (GRPO solves the task in ~12, the spec's REINFORCE in ~43)"""
    rl_algos: tuple[str, ...] = ("grpo", "reinforce", "reinforce_baseline", "dr_grpo")
    """RL algorithms compared (reinforce_baseline isolates the baseline: REINFORCE's loss and updates with GRPO's
    group mean subtracted)"""
    rl_eval_every: int = 5
    """greedy evaluation every N RL steps, for time-to-solve"""
    adaptive_steps: int = 200
    """RL steps per adaptive-thinking run"""
    adaptive_methods: tuple[str, ...] = ("thinkless_fmt",)
    """adaptive-thinking rewards compared (see adaptive.METHODS)"""
    adaptive_eval_n: int = 300
    """greedy evaluation problems per k for adaptive thinking"""
    l1_variants: tuple[str, ...] = ("max", "max+sft")
    """budget models trained for "thinking on a budget" (see budget.VARIANTS): the lab runs the pair that asks
    whether RL alone learns to read the budget; `reasonlab budget` runs all four"""
    l1_steps: int = 100
    """GRPO steps per budget model"""
    l1_sft_steps: int = 300
    """warm-start steps of the +sft budget models"""
    l1_eval_n: int = 100
    """greedy test problems per k and budget"""
    search_n_test: int = 100
    """verifiers and search: test problems per k"""
    search_n_val: int = 50
    """verifiers and search: validation problems per k (compute-optimal selection)"""
    search_n_max: int = 64
    """verifiers and search: largest N"""
    search_quick_verifiers: bool = False
    """verifiers and search: tiny verifiers (quick mode)"""


QUICK = Sizes(eval_n=40, budget_n=30, tts_n=40, tts_n_max=8, star_rounds=1, star_problems=400, star_steps=40, star_eval_n=30,
              rl_steps=4, rl_eval_every=2, adaptive_steps=4, adaptive_methods=("thinkless_fmt",), adaptive_eval_n=30,
              l1_steps=4, l1_sft_steps=10, l1_eval_n=8, search_n_test=4, search_n_val=3, search_n_max=4,
              search_quick_verifiers=True)


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
    execution: ExecConfig = field(default_factory=ExecConfig)
    """where the (experiment, seed) units run: this process (default), a local process pool, or Ray"""
    report_to: Literal["none", "tensorboard"] = "none"
    """tensorboard: event files of the RL runs under <out>/tensorboard/"""

    def validate(self) -> None:
        from . import tblog
        self.execution.validate()
        tblog.check(self.report_to)
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
    out = {}
    for f in S.star_filters:
        sc = star.StarConfig(rounds=S.star_rounds, problems=S.star_problems, steps=S.star_steps, seed=seed, filter=f,
                             eval_n=S.star_eval_n)
        out["main" if f == "answer" else f] = star.run(model, base_name(seed, cfg.quick), sc, log=None,
                                                        cache=cfg.cache, progress=True)
    return out


def rl_run(base: GPT, algo: str, seed: int, steps: int, every: int, eval_n: int = 500, probe_n: int = 100,
           lr: float | None = None, progress: bool = False, start: dict | None = None) -> dict:
    """One RL run from `base` with the spec's defaults for `algo`: greedy accuracy on a probe set every `every`
    steps (time-to-solve = first probe at >= 0.99; seconds count training only) and a final evaluation.
    start: base_eval(base, eval_n), when the caller has it (the same for every algorithm)."""
    policy = copy.deepcopy(base)
    cfg = RLConfig.preset(algo, steps=steps, seed=seed, log_every=0, **({"learning_rate": lr} if lr else {}))
    probe = problems_per_k(probe_n, seed=PROBE_SEED)
    state = {"eval_s": 0.0, "solved": None, "curve": []}
    t0 = time.perf_counter()

    def check(rec, model):
        step = rec["step"]
        t = time.perf_counter()
        r = evaluate(model, probe)
        state["curve"].append({"step": step, "acc": r["acc"], "length": r["length"], "share": r["share"]})
        if state["solved"] is None and r["acc"] >= 0.99:
            state["solved"] = {"step": step, "seconds": round(t - t0 - state["eval_s"], 1)}
        state["eval_s"] += time.perf_counter() - t

    # the reference is always passed so KL is logged; with beta = 0 (REINFORCE) it does not enter the loss
    hist = train(policy, copy.deepcopy(base), cfg, callback=every_n_steps(every, check), log=None, progress=progress)
    train_s = time.perf_counter() - t0 - state["eval_s"]
    probs = problems_per_k(eval_n, seed=TEST_SEED)
    final, start = evaluate(policy, probs), start or base_eval(base, eval_n)
    tail = [h for h in hist if not h.get("skipped")][-10:]   # DAPO may skip steps: they have no metrics
    sampled = {key: float(np.mean([h[key] for h in tail])) for key in ("acc", "length", "kl_exact", "entropy")}
    sampled["direct"] = float(np.mean([h["share"]["direct"] for h in tail]))
    return {"algo": algo, "seed": seed, "steps": steps, "train_s": round(train_s, 1), "solved": state["solved"],
            "sampled_last10": sampled, "base_acc": start["acc"], "acc": final["acc"], "share": final["share"],
            "length": final["length"], "acc_by_k": {k: v["acc"] for k, v in final["per_k"].items()},
            "share_by_k": {k: v["share"] for k, v in final["per_k"].items()}, "curve": state["curve"], "hist": hist}


def base_eval(base: GPT, eval_n: int) -> dict:
    """Greedy free generation of the base model on the test problems: where every RL run starts."""
    return evaluate(base, problems_per_k(eval_n, seed=TEST_SEED))


def exp_rl(model: GPT, S: Sizes, seed: int, cfg: LabConfig) -> dict:
    start = base_eval(model, S.eval_n)
    return {a: rl_run(model, a, seed, S.rl_steps, S.rl_eval_every, S.eval_n, progress=True, start=start)
            for a in S.rl_algos}


def exp_adaptive(model: GPT, S: Sizes, seed: int, cfg: LabConfig) -> dict:
    ref_acc = adaptive.reference_accuracy(model)
    runs = [adaptive.run_method(model, m, seed, steps=S.adaptive_steps, n_eval=S.adaptive_eval_n, ref_acc=ref_acc,
                                progress=True)
            for m in S.adaptive_methods]
    return {"runs": runs, "fixed": adaptive.fixed_points([model], S.adaptive_eval_n),
            "tts": adaptive.tts_points(model, S.adaptive_eval_n)}


def exp_l1(model: GPT, S: Sizes, seed: int, cfg: LabConfig) -> dict:
    bc = budget.BudgetConfig(variants=tuple(S.l1_variants), steps=S.l1_steps, sft_steps=S.l1_sft_steps,
                             eval_n=S.l1_eval_n, log_every=max(1, S.l1_steps // 5))
    return budget.run(bc, seed, base=model, log=None, progress=True)


def exp_search(model: GPT, S: Sizes, seed: int, cfg: LabConfig) -> dict:
    """Issue 17: learned verifiers' quality, then search with them, on the erring thinker (quick: the quick base)."""
    from . import verifier
    sc = search.SearchConfig(thinker="quick" if cfg.quick else "erring", n_test=S.search_n_test, n_val=S.search_n_val,
                             n_max=S.search_n_max, quick_verifiers=S.search_quick_verifiers)
    thinker = thinker_model(sc.thinker, seed, cfg.cache, cfg.device)
    vcfg = search.verifier_config(sc)
    quality = {"seed": seed, "thinker": sc.thinker, "kinds": {}}
    for kind in sc.verifiers:          # verifier.run's measurement, on this thinker (quick mode has its own)
        v = verifier.train_verifier(kind, thinker, seed, vcfg, cache=cfg.cache, log=None)
        q = verifier.verifier_quality(v, thinker, seed, S.search_n_test, vcfg)
        quality["kinds"][kind] = {**q, "train": {k: v.meta[k] for k in ("seconds", "n_outputs", "n_steps",
                                                                        "positive_share", "loss_first", "loss_last")}}
    return {"verifiers": quality, "search": search.run(sc, seed, cache=cfg.cache, device=cfg.device, log=None)}




# ---------------------------------------------------------------------------------------------------------------

SIZE_PREFIX = {"base": "eval_", "budgets": "budget_", "sampling": "tts_", "star": "star_", "rl": "rl_",
               "adaptive": "adaptive_", "l1": "l1_", "search": "search_"}   # the Sizes fields each experiment depends on


def unit_key(exp: str, seed: int, cfg: LabConfig) -> str:
    """What decides whether a finished result can be reused: the experiment's sizes, the base model's recipe (and,
    for search, the erring thinker's and the verifiers' settings), the package version."""
    from . import __version__
    from .train import ERR_CFG
    from .verifier import VerifierConfig
    sizes = {f: v for f, v in asdict(cfg.sizes).items() if f.startswith(SIZE_PREFIX[exp]) or (exp == "rl" and f == "eval_n")}
    extra = {"erring": ERR_CFG, "verifier": asdict(VerifierConfig())} if exp == "search" else {}
    return fingerprint({"exp": exp, "seed": seed, "sizes": sizes, "base": cache_key(base_cfg(seed, cfg.quick)),
                        "version": __version__, "cache_version": CACHE_VERSION, **extra})


def lab_base(cfg: LabConfig, seed: int) -> dict:
    """A unit that puts the seed's base model into the cache (trained under a lock, or found there)."""
    cached_model(base_name(seed, cfg.quick), base_cfg(seed, cfg.quick), cache=cfg.cache, device=cfg.device,
                 progress=True)
    return {"seed": seed}


def lab_unit(cfg: LabConfig, exp: str, seed: int) -> dict:
    """One (experiment, seed) unit: the seed's base model from the cache (memoized per process), then the experiment."""
    model = cached_model(base_name(seed, cfg.quick), base_cfg(seed, cfg.quick), cache=cfg.cache, device=cfg.device,
                         progress=True)
    return PROTOCOL[exp].run(model, cfg.sizes, seed, cfg)


def run(cfg: LabConfig, log: Callable = print) -> dict:
    """Run (or reuse) every experiment for every seed on cfg.execution, then write the report. Returns
    {experiment: [per-seed results]}. The base models are units of their own, queued first (one per seed, in
    parallel where the executor is), each seed's experiments queued behind the models trained before its own."""
    cfg.validate()
    os.makedirs(cfg.out, exist_ok=True)
    write_json(os.path.join(cfg.out, "config.json"), asdict(cfg))
    t_lab = time.perf_counter()
    timing: dict[str, float] = {}
    ucfg = replace(cfg, cache=cache_dir(cfg.cache))   # workers elsewhere (another cwd or node): an absolute path
    logs = os.path.abspath(os.path.join(cfg.out, "logs"))
    units, where = [], {}
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
            uid = f"{exp}/seed{seed}"
            units.append(Unit(uid, lab_unit, dict(cfg=ucfg, exp=exp, seed=seed), log=os.path.join(logs, f"{exp}-seed{seed}.log")))
            where[uid] = (i, path, key)
    # Base models are units too, queued first. Each is trained once under its cache lock; units of a seed whose model
    # is still training queue behind the other seeds' units, so no worker waits on the lock while work is left
    # (with 3 seeds on 2 workers the third model used to train alone, one worker idle for its ~100 s).
    seeds = sorted(s for s in {u.kwargs["seed"] for u in units}
                   if not model_in_cache(base_name(s, cfg.quick), base_cfg(s, cfg.quick), ucfg.cache))
    wave = {s: i // max(1, cfg.execution.workers) for i, s in enumerate(seeds)}   # which round of training has it
    units.sort(key=lambda u: (wave.get(u.kwargs["seed"], 0), LONGEST_FIRST.index(u.kwargs["exp"])))
    bases = [Unit(f"base-model/seed{s}", lab_base, dict(cfg=ucfg, seed=s), log=os.path.join(logs, f"base-model-seed{s}.log"))
             for s in seeds]

    def on_start(u: Unit, attempt: int) -> None:
        if u.uid not in where:
            return
        i = where[u.uid][0]
        log(f"[{i + 1}/{len(cfg.only)}] {u.kwargs['exp']}, seed {u.kwargs['seed']} ..."
            + (f" (attempt {attempt})" if attempt > 1 else ""))

    def on_done(u: Unit, res: dict, secs: float) -> None:
        timing[u.uid] = round(secs, 1)
        if u.uid not in where:                      # a base model: in the cache now
            return
        _, path, key = where[u.uid]
        write_json(path, {"key": key, "seconds": round(secs, 1), "result": res})
        log(f"    {u.uid} done in {secs:.1f}s")
    outcomes = run_units(bases + units, cfg.execution, on_done=on_done, log=log, on_start=on_start)
    # a base model that failed resurfaces in its seed's units (each tries to train it again)
    failed = {uid: o.error for uid, o in outcomes.items() if not o.ok and uid in where}
    if bases:
        timing["base models"] = round(sum(timing.get(u.uid, 0.0) for u in bases), 1)
    results = load_results(cfg.out, cfg.seeds)
    wall = time.perf_counter() - t_lab
    meta = {"seeds": list(cfg.seeds), "quick": cfg.quick, "wall_s": round(wall, 1), "ran": timing,
            "executor": asdict(cfg.execution), **({"failed": failed} if failed else {})}
    write_json(os.path.join(cfg.out, "timing.json"), meta)
    paths = write_report(cfg.out, results, meta)
    if cfg.report_to == "tensorboard":
        from . import tblog
        tblog.write_lab(cfg.out, results)
    log(f"lab finished in {wall:.0f}s; report: {paths['html']} and {paths['md']}")
    if failed:
        raise UnitsFailed(f"{len(failed)} unit(s) failed after retries (see {logs}): "
                          + "; ".join(f"{u}: {e}" for u, e in failed.items()))
    return results


def load_results(out: str, seeds) -> dict:
    """{experiment: {"results": [per-seed results], "seconds": [...]}} for every experiment with a result per seed."""
    res = {}
    for exp in EXPERIMENTS:
        files = [os.path.join(out, exp, f"seed{s}.json") for s in seeds]
        if all(os.path.exists(p) for p in files):
            recs = [load_json(p) for p in files]
            res[exp] = {"results": [r["result"] for r in recs], "seconds": [r["seconds"] for r in recs]}
    return res


# ---------------------------------------------------------------------------------------------------------------
# The report: one markdown section per experiment (question, picture, numbers, paper, what to try next), rendered to
# report.md and a self-contained report.html.

def section_base(rs: list[dict], out: str) -> tuple[str, str]:
    report.plot_lab_base(rs, os.path.join(out, "base", "accuracy_by_k.png"))
    rows = ["| generation | accuracy (k = 2..8) | worst k | mean tokens | free share A / S / T |", "|---|---|---|---|---|"]
    for c in ("free", "A", "S", "T"):
        share = " / ".join(pm([r[c]["share"][f] for r in rs], "{:.2f}") for f in FMT_NAMES) if c == "free" else ""
        rows.append(f"| {'free (the model picks)' if c == 'free' else 'forced ' + c} | {pm([r[c]['acc'] for r in rs])} | "
                    f"{pm([min(r[c]['acc_by_k'].values()) for r in rs])} | {pm([r[c]['length'] for r in rs], '{:.2f}')} | {share} |")
    head = (f"forced S {pm([r['S']['acc'] for r in rs])}, forced T {pm([r['T']['acc'] for r in rs])}, "
            f"direct A {pm([r['A']['acc'] for r in rs])} (chance 0.1)")
    md = f"""## 1. The base model: does writing a chain help?

> **Question.** A 200K-parameter GPT is pre-trained on a mix of direct answers (A), short chains (S) and full
> chains (T). How accurate is each format, and which does the model choose on its own?

![accuracy per k](base/accuracy_by_k.png)

{chr(10).join(rows)}

Greedy decoding on the test set; mean ± std over seeds.
{findings.verdict_line(findings.chains_beat_direct(rs))} Free generation answers directly (A) in
{pm([r["free"]["share"]["direct"] for r in rs], "{:.2f}")} of problems: A was half of the pre-training mix, so the
model has to learn *when* to think (sections 5–7).

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
    mins = [i for i, b in enumerate(avg) if b["format"] == "T" and b["kind"] == "min"]
    natural = pm([r["budgets"][[i for i, b in enumerate(avg) if b is t[-1]][0]]["acc"] for r in rs])
    longest = (avg[mins[-1]]["budget"], pm([r["budgets"][mins[-1]]["acc"] for r in rs])) if mins else ("—", "—")
    head = f"T capped at 0 steps {t[0]['acc']:.2f} → {t[-1]['budget']} steps {t[-1]['acc']:.2f}"
    md = f"""## 2. Thinking longer: forced formats and thinking budgets

> **Question.** If we force the model to think for at most (or at least) b chain steps, how does accuracy follow
> the thinking budget?

![budget forcing](budgets/budgets.png)

{chr(10).join(rows)}

Greedy decoding; "at most b": once the chain has b running sums the answer marker is forced (s1's budget cap);
"at least b": the end of the chain is suppressed until b sums are written (s1's "Wait"). Error bars: ± std over
seeds. Tokens count up to the end of the answer. {findings.verdict_line(findings.budget_trades_accuracy_for_tokens(rs))}
Forced past its natural end (T, at least {longest[0]} steps): accuracy {longest[1]} against {natural} with the chain
uncapped at {t[-1]['budget']} steps.

*Paper:* s1: simple test-time scaling (Muennighoff et al. 2025, arXiv 2501.19393).
*Explore:* `tts.budget_hook(max_chain=b)` on any generation; `reasonlab tts` for the full sweep.
"""
    return md, head


def section_sampling(rs: list[dict], out: str) -> tuple[str, str]:
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
    rows.append(f"| chance | {' | '.join(f'{tts.chance(m, n):.3f}' for m in ('maj', 'maj', 'maj', 'maj', 'pass'))} | |")
    fmts = rs[0]["formats"]
    if "A" in fmts:
        head = f"A maj@{n} {pm([r['curves']['A']['maj'][n]['acc'] for r in rs])} vs greedy A " \
               f"{pm([r['curves']['A']['greedy']['acc'] for r in rs])}"
        direct = (f"pass@{n} of direct answers is {pm([r['curves']['A']['pass'][n]['acc'] for r in rs])} where "
                  f"guessing gives {tts.chance('pass', n):.3f}.")
    else:
        head, direct = f"{fmts[0]} maj@{n} {pm([r['curves'][fmts[0]]['maj'][n]['acc'] for r in rs])}", ""
    greedy = "; ".join(f"greedy {f} {pm([r['curves'][f]['greedy']['acc'] for r in rs])}" for f in fmts)
    md = f"""## 3. Sampling more: voting

> **Question.** Instead of thinking, sample N direct answers and take the majority. Does voting buy what a chain
> buys?

![accuracy against N](sampling/acc_vs_n.png)

![per k](sampling/per_k.png)

{chr(10).join(rows)}

{rs[0]['n_per_k']} problems per k, N up to {n} samples at temperature 1, mean ± std over seeds (the picture: first
seed, 95 % bootstrap bands over problems; grey: chance for one answer and for pass@N, 1 − 0.9^N).
{findings.verdict_line(findings.voting_cannot_rescue_direct(rs))} {direct} For comparison: {greedy}. Whether
voting helps chains that err is measured on the erring thinker (section "Verifiers and search").

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
    md = f"""## 4. Verifiers and the compute-optimal frontier

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
target at every k. Mean ± std over seeds. {findings.verdict_line(findings.frontier_gain(rs))}

*Papers:* Let's verify step by step (Lightman et al. 2023, arXiv 2305.20050); compute-optimal test-time scaling
(Snell et al. 2024, arXiv 2408.03314).
*Explore:* `tts.frontier(pools)` with your own targets, or `reasonlab tts --formats A S T free`.
"""
    return md, head


def section_star(rs: list[dict], out: str) -> tuple[str, str]:
    hists = [r["main"] for r in rs]
    variants = {v: [r[v] for r in rs] for v in rs[0]}
    report.plot_star(variants, os.path.join(out, "star", "star.png"))
    head = f"free accuracy {pm([h[0]['free'] for h in hists])} → {pm([h[-1]['free'] for h in hists])} in {len(hists[0]) - 1} round(s)"
    md = f"""## 5. STaR: the model teaches itself to think

> **Question.** Sample from the model, keep the outputs with the right answer, fine-tune the base on them, repeat.
> Does free-format accuracy rise as the kept data favour the chains that are right?

![STaR rounds](star/star.png)

{report.star_table(variants)}

4 samples per problem at temperature 1, each round fine-tuned from the base model; mean ± std over seeds. Only
complete templates with the right answer are kept; "right answer, wrong chain" (STaR's false positive, exactly
measurable here) is the share of those chains with a wrong step. {findings.verdict_line(findings.star_raises_free_accuracy(rs))}
{findings.verdict_line(findings.chain_filter_vs_answer_filter(rs))}

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
> to thinking, and does the baseline matter (REINFORCE with and without GRPO's group mean, all else equal)?

![RL curves](rl/curves.png)

![format share](rl/formats_{algos[0]}.png)

{report.rl_table(runs)}

16 problems × 8 samples per step, the spec's settings (lr 3e-5, β 0.04, clip 0.2, 2 inner updates); time-to-solve
is the first greedy probe (100 problems per k, the probe set) at ≥ 0.99. GRPO differs from the spec's REINFORCE in
its baseline, its std scaling, two clipped updates per batch and the KL; `reinforce_baseline` changes only the
baseline. {" ".join(findings.verdict_line(f) for f in (findings.rl_faster(rs, "grpo", "reinforce", "GRPO reaches 0.99 in fewer steps than REINFORCE without a baseline"), findings.rl_faster(rs, "reinforce_baseline", "reinforce", "The baseline alone makes REINFORCE reach 0.99 in fewer steps")))}

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
tried, and those rollouts train only that choice (`thinkless_fmt`); mean ± std over seeds; every point of the
table and the plane is on the test set. {" ".join(findings.verdict_line(f) for f in findings.adaptive_vs_always_s(rs))}

*Papers:* Thinkless (Fang et al. 2025, arXiv 2505.13379); AdaptThink (Zhang et al. 2025, arXiv 2505.13417);
length penalties (Arora & Zanette 2025, arXiv 2502.04463); Kimi k1.5 (arXiv 2501.12599).
*Explore:* `reasonlab adaptive --methods grpo cost0.3 cost0.6 kimi thinkless thinkless_fmt arm adaptthink`.
"""
    return md, head


def section_l1(rs: list[dict], out: str) -> tuple[str, str]:
    md, head = budget.render(rs, out, prefix="l1")
    return md.replace("## Thinking on a budget", "## 8. Thinking on a budget", 1), head


def section_learned_verifiers(rs: list[dict], out: str) -> tuple[str, str]:
    from . import verifier
    q = [r["verifiers"] for r in rs]
    md = verifier.render(q, out)        # writes out/verifier_quality.png, linked from report.md beside it
    head = ", ".join(f"{k} step AUROC {pm([x['kinds'][k]['step_auroc'] for x in q])}" for k in q[0]["kinds"])
    return md, head


def section_search(rs: list[dict], out: str) -> tuple[str, str]:
    res = [r["search"] for r in rs]
    fs = search.findings(res)           # a two-level bootstrap per claim: computed once for the page and the line
    return search.render(res, os.path.join(out, "search"), prefix="search/", fs=fs), search.headline(res, fs)


class Experiment(NamedTuple):
    """The one experiment protocol. run(base model, sizes, seed, lab config) -> a JSON-able result for one seed;
    render(results over seeds, out) -> the report's sections [(markdown, headline)], writing their plots under out.
    The lab, the CLI commands (`reasonlab tts`, `star`, `adaptive`, their --replot) and experiments/ call these
    two; nothing else renders results."""
    run: Callable
    render: Callable


def sections(*builders) -> Callable:
    return lambda rs, out: [b(rs, out) for b in builders]


PROTOCOL: dict[str, Experiment] = {
    "base": Experiment(exp_base, sections(section_base)),
    "budgets": Experiment(exp_budgets, sections(section_budgets)),
    "sampling": Experiment(exp_sampling, sections(section_sampling, section_verifiers)),
    "star": Experiment(exp_star, sections(section_star)),
    "rl": Experiment(exp_rl, sections(section_rl)),
    "adaptive": Experiment(exp_adaptive, sections(section_adaptive)),
    "l1": Experiment(exp_l1, sections(section_l1)),
    "search": Experiment(exp_search, sections(section_learned_verifiers, section_search)),
}


def render(exp: str, results: list[dict], out: str) -> list[tuple[str, str]]:
    """One experiment's sections from its per-seed results (the lab's report, and each CLI command's)."""
    return PROTOCOL[exp].render(results, out)


RENDER_LONGEST_FIRST = ("search", "l1", "sampling", "rl", "star", "adaptive", "base", "budgets")
"""The order sections are handed to the rendering processes: longest first (full lab: search 6.1 s, l1 3.0,
sampling 1.1, the rest 0.1-0.7), so that one process renders search while the other renders the rest."""

_TO_RENDER: tuple = ()   # (results, out) for the forked rendering processes, which read it from the parent's memory


def _render_forked(exp: str) -> list[tuple[str, str]]:
    results, out = _TO_RENDER
    return render(exp, results[exp]["results"], out)


def render_all(results: dict, out: str, workers: int | None = None, also: Callable | None = None):
    """({experiment: its sections} for every experiment in results, also()): the sections rendered by `workers`
    forked processes (None: one per CPU, at most one per experiment; 1: here), longest first, while this process
    runs also(). Rendering is matplotlib and numpy on one core (the quick lab's 9.5 s, the full lab's 12 s); the
    sections are independent, so two processes halve it. Fork, not spawn: a spawned process imports torch and
    matplotlib again (~2 s). Forking a process whose torch has started OpenMP threads is safe only while the child
    runs no torch op (libgomp's pool does not survive fork: pytorch/pytorch#17199), and rendering runs none
    (tests/test_lab.py checks it). Where fork is missing (Windows, macOS's default), or a rendering process dies, it
    renders here."""
    global _TO_RENDER
    import multiprocessing as mp
    import warnings
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    exps = [e for e in RENDER_LONGEST_FIRST if e in results]
    workers = min(len(exps), os.cpu_count() or 1) if workers is None else workers
    here = lambda: {e: render(e, results[e]["results"], out) for e in exps}   # noqa: E731
    if workers < 2 or len(exps) < 2 or sys.platform != "linux":
        return here(), also() if also else None
    _TO_RENDER, extra = (results, out), None
    try:
        with warnings.catch_warnings(), ProcessPoolExecutor(min(workers, len(exps)),
                                                            mp_context=mp.get_context("fork")) as pool:
            warnings.simplefilter("ignore", DeprecationWarning)   # Python >= 3.12 on forking a threaded process
            futs = {e: pool.submit(_render_forked, e) for e in exps}
            extra = also() if also else None
            done = {e: f.result() for e, f in futs.items()}
    except BrokenProcessPool:   # a rendering process died (killed, out of memory): render here instead
        done = here()
        if also and extra is None:
            extra = also()
    finally:
        _TO_RENDER = ()
    return done, extra


def write_report(out: str, results: dict, meta: dict, workers: int | None = None) -> dict:
    """Build every section with results (render_all: `workers` processes), the headline table on top; write
    report.md and report.html."""
    parts, heads = [], []
    secs, fs = render_all(results, out, workers, also=lambda: findings.lab_findings(results))
    for exp in PROTOCOL:
        for md, head in secs.get(exp, []):
            parts.append(md)
            heads.append(f"| {md.splitlines()[0][3:]} | {head} | {sum(results[exp]['seconds']):.0f} s |")
    write_json(os.path.join(out, "findings.json"), fs)
    seeds = ", ".join(map(str, meta["seeds"]))
    quick = ("\n**Quick mode**: a small base model and tiny experiments that check the pipeline; the numbers are not "
             "results.\n" if meta["quick"] else "")
    top = f"""# reasonlab: the lab report

A 200K-parameter GPT learns "sum of k digits mod 10" (k = 2..8) and chooses how long to think: answer at once
(A), a short chain (S) or a full chain (T). Seeds {seeds}; mean ± std over seeds unless a line says otherwise;
chance is 0.1 for any single answer. Lab wall time {meta['wall_s']:.0f} s; the base models took
{meta.get('ran', {}).get('base models', 0.0):.0f} s of worker time to load or train (experiments reused from an
earlier run count their original time in the table).{quick}

## Findings

Each claim is checked on this run's results: the statistic, its 95 % interval (t over seeds, or a two-level
bootstrap over seeds and problems), the per-seed values, the threshold, and the verdict read off the interval.

{findings.table(fs)}

| experiment | headline | compute time |
|---|---|---|
{chr(10).join(heads)}
"""
    return report.write_report(out, top + "\n" + "\n".join(parts), "reasonlab lab report")
