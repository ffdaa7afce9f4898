"""The search experiment: learned verifiers on a thinker whose chains err, their quality against the rule, and
search with them (best-of-N, weighted majority, beam search, DVTS: methods.search) against voting without one.

One seed: each learned verifier (ORM, PRM, Math-Shepherd PRM) is trained on the thinker's own samples and measured
against the oracle on held-out problems (`verifier.verifier_quality`); then every method x verifier x N runs on
validation and test problems, the oracle (`verifier.OracleVerifier`) among the verifiers. Baselines: greedy
decoding and plain majority (tts.majority). Best-of-N, weighted and majority are read from one pool of n_max
samples per problem, subsampled to N = 1, 2, 4, ... (the first N; search-and-learn's score.py draws its curves
so); beam search and DVTS are re-run for every N. Per strategy and split the result keeps each problem's
correctness and token counts (io.pack strings), so the claims can go over problems and seeds.

Compute, per problem: generated and verifier tokens as methods.search counts them (best-of-N: the N samples'
lengths, each sample read once by the verifier; majority and greedy read none), and
FLOPs = 2 * P_gen * (prompt length + generated tokens) + 2 * P_ver * verifier tokens (Kaplan et al. 2020's forward
cost, 2 FLOPs per parameter per token; attention's share is negligible at digits' length 24; the generator reads its
prompt once per problem). The oracle's FLOPs use P_ver = a learned verifier's size (the thinker's).

The report has two sections: the search, then the verifiers' quality.
"""
from __future__ import annotations

import os
import time
import warnings
from dataclasses import asdict, dataclass, replace
from typing import Literal

import numpy as np
import torch

from .. import tasks
from ..core.config import NS
from ..core.pool import sample_pool
from ..core.problems import problems_per_k, test_problems
from ..io.pack import pack_bits, pack_ints, unpack_bits, unpack_ints
from ..io.report import log_x, md_table, plt, save
from ..methods.config import KINDS, VerifierConfig
from ..methods.search import Scorer, best_of_n, chunked, weighted
from ..methods.tts import majority
from ..methods.verifier import OracleVerifier, UniformVerifier, train_verifier, verifier_quality
from ..stats import findings
from ..stats.summary import pm
from ..tasks import Task
from ..train.zoo import on_erring, thinker_model
from . import Experiment, register, task_of
from .thresholds import THRESHOLDS as TH

SEARCH_METHODS = ("bon", "weighted", "beam", "beam_dedup", "dvts")
SEARCHES = ("beam", "beam_dedup", "dvts")
"""the methods that search over steps: each N is a search of its own"""


@dataclass
class Config:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    thinker: Literal["erring", "base", "quick"] = "erring"
    """the generator: the erring thinker (train.zoo.get_erring_model), the standard base model (the contrast), or the
    lab's quick base model (train.sft.QUICK_CFG: its S chains err; for tests and quick runs)"""
    force: Literal["S", "T"] = "S"
    """the chain format every method writes (forced as the first token)"""
    n_val: int = 50
    """validation problems per k (the compute-optimal selection)"""
    n_test: int = 100
    """test problems per k (every reported number, and the verifiers' quality check); disjoint from validation and
    from every verifier's training"""
    n_max: int = 64
    """largest N (a power of two up to 64); N runs over 1, 2, 4, ... up to it"""
    width: int = 4
    """M, the beam width (expansions per beam per step) of beam search and DVTS (min(M, N) where N < M)"""
    temperature: float = 1.0
    """sampling temperature of every method"""
    agg: Literal["last", "min", "prod"] = "min"
    """how an output's step scores become one score, in every method (search-and-learn's agg_strategy; its default
    is "last": "min" makes the oracle's score the process check, task.check_chain)"""
    verifiers: tuple[Literal["orm", "prm", "prm-mc"], ...] = KINDS
    """learned verifiers to train, measure and search with; the oracle always runs too"""
    search_verifiers: tuple[Literal["orm", "prm", "prm-mc", "oracle"], ...] = ("prm", "oracle")
    """verifiers that guide beam search and DVTS (each costs a search per N)"""
    methods: tuple[Literal["bon", "weighted", "beam", "beam_dedup", "dvts"], ...] = SEARCH_METHODS
    """search methods to run; greedy and majority always run"""
    quick_verifiers: bool = False
    """train the verifiers small (tests and quick runs: the numbers mean little)"""
    weigh_with: Literal["prm", "uniform"] = "prm"
    """the verifier whose weighted vote the primary claim reads against majority voting: the learned PRM, or one
    that scores every step alike ("uniform", the placebo: its weighted vote is majority voting)"""

    def validate(self) -> None:
        if self.n_max not in NS:
            raise ValueError(f"invalid n_max {self.n_max}: use one of {', '.join(map(str, NS))}")
        if self.width < 1 or self.width & (self.width - 1):
            raise ValueError(f"invalid width {self.width}: a power of two >= 1")
        if self.temperature <= 0:
            raise ValueError("temperature must be > 0 (search samples)")
        for v in self.verifiers:
            if v not in KINDS:
                raise ValueError(f"unknown verifier {v!r}: use {', '.join(KINDS)}")
        for v in self.search_verifiers:
            if v not in (*self.verifiers, "oracle"):
                raise ValueError(f"search verifier {v!r} must be oracle or one of --verifiers")
        for m in self.methods:
            if m not in SEARCH_METHODS:
                raise ValueError(f"unknown search method {m!r}: use {', '.join(SEARCH_METHODS)}")
        if self.weigh_with not in (*self.verifiers, "uniform") or "weighted" not in self.methods:
            raise ValueError(f"weigh_with {self.weigh_with!r} needs the weighted method and must be uniform or one of "
                             "--verifiers")

    @property
    def Ns(self) -> tuple[int, ...]:
        return tuple(n for n in NS if n <= self.n_max)


# ---------------------------------------------------------------------------------------------------------------
# One seed: the verifiers and their quality, then the grid.

def verifier_config(cfg: Config) -> VerifierConfig:
    """The verifiers' training settings: VerifierConfig's defaults, or tiny ones (quick runs, tests)."""
    return VerifierConfig(n_per_k=10, steps=10, rollouts=2, batch=32) if cfg.quick_verifiers else VerifierConfig()


FIRST = "first_error_auroc"
"""the verifiers' step AUROC the page leads with: on the steps up to each output's first error (verifier_quality)"""
TRAIN_KEYS = ("seconds", "n_outputs", "n_steps", "positive_share", "loss_first", "loss_last")
"""what the quality record keeps of a verifier's training metadata"""


def verifiers(cfg: Config, seed: int, thinker, cache: str | None) -> tuple[dict, dict, float]:
    """Each learned verifier of cfg.verifiers trained on the thinker's samples (or read from the cache) and measured
    on held-out problems: (the verifiers by kind, their quality record, seconds spent getting them)."""
    vcfg = verifier_config(cfg)
    learned, quality, seconds = {}, {"seed": seed, "thinker": cfg.thinker, "kinds": {}}, 0.0
    for kind in cfg.verifiers:
        t = time.perf_counter()
        v = learned[kind] = train_verifier(kind, thinker, seed, vcfg, cache=cache, log=None, task=cfg.task)
        seconds += time.perf_counter() - t
        q = verifier_quality(v, thinker, seed, cfg.n_test, vcfg, task=cfg.task)
        quality["kinds"][kind] = {**q, "train": {k: v.meta[k] for k in TRAIN_KEYS}}
    return learned, quality, seconds


def run(cfg: Config, seed: int, env) -> dict:
    """The verifiers' quality ("verifiers"), then every method x verifier x N on the validation and test problems
    ("search")."""
    thinker = thinker_model(cfg.thinker, seed, env.cache, env.device, task=cfg.task)
    learned, quality, seconds = verifiers(cfg, seed, thinker, env.cache)
    return {"verifiers": quality, "search": grid(cfg, seed, thinker, learned, {"verifiers": round(seconds, 1)})}


def grid(cfg: Config, seed: int, model, learned: dict, timing: dict) -> dict:
    """Every method x verifier (the learned ones by kind, and the oracle) x N on the validation and test problems
    of one seed: per strategy and split, each problem's correctness and token counts. timing: stage seconds so far
    (it gets the grid's)."""
    t_all = time.perf_counter()
    verifiers = {"oracle": OracleVerifier(), **learned,
                 **({"uniform": UniformVerifier()} if cfg.weigh_with == "uniform" else {})}
    n_params = sum(p.numel() for p in model.parameters())
    scorers = {k: Scorer(v) for k, v in verifiers.items()}
    problems = {"val": problems_per_k(cfg.n_val, f"search-{seed}", split="val", task=cfg.task),
                "test": test_problems(cfg.n_test, "search", seed, task=cfg.task)}
    res = {"config": stored_config(cfg), "seed": seed, "n_params": n_params,
           "ver_params": {k: (v.flops_per_token / 2 or n_params + model.cfg.d_model + 1) for k, v in verifiers.items()},
           "k": {s: [p.k for p in ps] for s, ps in problems.items()}, "strategies": {}, "timing": timing}
    for split, probs in problems.items():
        sampled(res, cfg, seed, model, scorers, split, probs)
        searched(res, cfg, seed, model, scorers, split, probs)
    timing["verifier_sequences_read"] = {k: s.calls for k, s in scorers.items()}
    timing["total"] = round(time.perf_counter() - t_all + timing.get("verifiers", 0.0), 1)
    return res


def stored_config(cfg: Config) -> dict:
    """The config as a result keeps it: every field, the task as its spec, left out on digits (whose results keep
    the keys they had)."""
    out = {**asdict(cfg), "task": tasks.get(cfg.task).spec}
    if out["task"] == "digits":
        del out["task"]
    return out


def put(res: dict, name: str, split: str, N: int, correct, gen, ver, ver_inc=None) -> None:
    """Store one strategy's per-problem correctness and token counts at one N (io.pack strings)."""
    res["strategies"].setdefault(name, {}).setdefault(split, {})[N] = {
        "correct": pack_bits(correct), "gen": pack_ints(gen), "ver": pack_ints(ver),
        "ver_inc": pack_ints(ver if ver_inc is None else ver_inc)}


def sampled(res: dict, cfg: Config, seed: int, model, scorers: dict, split: str, probs: list) -> None:
    """Greedy decoding, then majority, best-of-N and weighted majority at every N from one pool of n_max samples per
    problem (each distinct output scored once per verifier)."""
    timing, t = res["timing"], time.perf_counter()
    gp = sample_pool(model, probs, 1, [cfg.force], temperature=0.0, seed=seed)
    put(res, "greedy", split, 1, gp.correct[:, 0], gp.length[:, 0], np.zeros(len(probs)))
    pool = sample_pool(model, probs, cfg.n_max, [cfg.force], cfg.temperature, seed=seed + 1000 * (split == "test"),
                       keep_outputs=True)
    timing[f"sample_{split}"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    flat_d, flat_o = pool.flat()
    scores = {k: sc.values(flat_d, flat_o, cfg.agg).reshape(len(probs), cfg.n_max) for k, sc in scorers.items()}
    for sc in scorers.values():
        sc.add_prefixes(flat_d, flat_o)
    timing[f"score_{split}"] = round(time.perf_counter() - t, 1)
    vt = task_of(res).prompt_len + pool.length                      # verifier tokens per sample
    for N in cfg.Ns:
        gen = pool.length[:, :N].sum(1)
        put(res, "majority", split, N, majority(pool, N), gen, np.zeros(len(probs)))
        for k in scorers:
            if "bon" in cfg.methods:
                put(res, f"bon/{k}", split, N, best_of_n(pool, scores[k], N), gen, vt[:, :N].sum(1))
            if "weighted" in cfg.methods:
                put(res, f"weighted/{k}", split, N, weighted(pool, scores[k], N), gen, vt[:, :N].sum(1))


def searched(res: dict, cfg: Config, seed: int, model, scorers: dict, split: str, probs: list) -> None:
    """Beam search (with and without filter_duplicates) and DVTS with each search verifier at every N, each from
    its own generator."""
    t = time.perf_counter()
    task = tasks.of(probs)
    truth = np.array([task.answer(p) for p in probs])
    device = next(model.parameters()).device
    for m in (m for m in SEARCHES if m in cfg.methods):
        for k in cfg.search_verifiers:
            for N in cfg.Ns:
                gen = torch.Generator(device=device).manual_seed(
                    seed * 1000 + N + 100 * (m == "dvts") + 50 * (split == "test"))
                r = chunked(m, model, scorers[k], probs, N, cfg.width, gen, force=cfg.force,
                            temperature=cfg.temperature, agg=cfg.agg)
                ans = np.array([-1 if (a := task.parse(o)["answer"]) is None else a for o in r["pick"]])
                put(res, f"{m}/{k}", split, N, ans == truth, r["gen_tokens"], r["ver_tokens"], r["ver_tokens_inc"])
    res["timing"][f"search_{split}"] = round(time.perf_counter() - t, 1)


# ---------------------------------------------------------------------------------------------------------------
# Reading results: accuracy and compute per strategy, the compute-optimal choice per k.

def cell(res: dict, name: str, N, split: str = "test") -> dict | None:
    """One strategy's stored per-problem strings at one N and split (None where it did not run)."""
    d = res["strategies"].get(name, {}).get(split, {})
    return d.get(int(N), d.get(str(N)))      # int keys once read back from the store, str when fresh


def per_problem(res: dict, name: str, N, split: str = "test", k: int | None = None):
    """(correct (P,), generated tokens (P,), verifier tokens (P,), FLOPs (P,)) of one strategy, k = one k or all."""
    c = cell(res, name, N, split)
    ks = np.array(res["k"][split])
    m = np.ones(len(ks), bool) if k is None else ks == k
    gen, ver = unpack_ints(c["gen"])[m], unpack_ints(c["ver"])[m]
    vk = name.split("/")[1] if "/" in name else None
    flops = 2 * res["n_params"] * (task_of(res).prompt_len + gen) + (2 * res["ver_params"][vk] * ver if vk else 0.0)
    return unpack_bits(c["correct"])[m].astype(float), gen, ver, flops


def strategies(res: dict) -> list[tuple[str, int]]:
    """Every (strategy, N) of a result, as its test split has them."""
    return [(name, int(N)) for name, d in res["strategies"].items() for N in d["test"]]


def compute_optimal(res: dict, targets=(0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99), oracle: bool = False) -> list[dict]:
    """Snell et al.'s compute-optimal strategy per k against the best single strategy, at matched accuracy.

    Candidates: every method x learned verifier x N, greedy and majority included (the oracle's strategies only with
    oracle=True: no deployed system has the rule); cost = generated + verifier tokens. A per-k choice maximises
    accuracy - lambda * cost at each k (a Lagrangian sweep over lambda traces the per-k frontier). Choosing one of
    ~60 candidates per k on a few validation problems overfits, so each lambda's accuracy is cross-fitted: chosen on
    one half of the validation problems, scored on the other, both ways. For each target overall accuracy: the
    cheapest lambda whose cross-fitted accuracy reaches it (its choice then made on all validation problems), and
    the cheapest single strategy whose validation accuracy reaches it; both are read on the test problems, where
    the report puts their accuracies beside the token ratio. Overall accuracy and cost are means over k."""
    ks = sorted(set(res["k"]["test"]))
    pts = []
    for name, N in strategies(res):
        if cell(res, name, N, "val") is None or (name.endswith("/oracle") and not oracle):
            continue
        row = {"name": name, "N": N}
        for split in ("val", "test"):
            row[split] = {k: per_problem(res, name, N, split, k) for k in ks}
        pts.append(row)

    def means(split, rows=None):                # (acc, cost) per k: arrays over the candidates
        out = {}
        for k in ks:
            r = slice(None) if rows is None else rows[k]
            out[k] = (np.array([p[split][k][0][r].mean() for p in pts]),
                      np.array([(p[split][k][1] + p[split][k][2])[r].mean() for p in pts]))
        return out

    n_val = {k: len(pts[0]["val"][k][0]) for k in ks}
    halves = [{k: np.arange(n_val[k]) % 2 == h for k in ks} for h in (0, 1)]
    val, test, half = means("val"), means("test"), [means("val", h) for h in halves]

    def choose(lam, tab) -> dict[int, int]:     # per k, the candidate maximising acc - lam * cost (ties: cheaper)
        return {k: int(np.lexsort((tab[k][1], -(tab[k][0] - lam * tab[k][1])))[0]) for k in ks}

    def overall(choice, tab):
        return float(np.mean([tab[k][0][choice[k]] for k in ks])), float(np.mean([tab[k][1][choice[k]] for k in ks]))

    sweep = []
    for lam in [0.0, *np.logspace(-6, 0, 61)]:
        cross = [overall(choose(lam, half[h]), half[1 - h]) for h in (0, 1)]
        sweep.append((lam, float(np.mean([a for a, _ in cross])), float(np.mean([c for _, c in cross]))))
    single = [overall({k: i for k in ks}, val) for i in range(len(pts))]
    out = []
    for t in targets:
        ad = [s for s in sweep if s[1] >= t]
        fixed = [i for i, (a, _) in enumerate(single) if a >= t]
        if not ad or not fixed:
            out.append({"target": t, "reachable": False})
            continue
        chosen = choose(min(ad, key=lambda s: s[2])[0], val)
        best = min(fixed, key=lambda i: single[i][1])
        (a_test, c_test), (f_test, fc_test) = overall(chosen, test), overall({k: best for k in ks}, test)
        name = lambda i: f"{pts[i]['name']}@{pts[i]['N']}"      # noqa: E731
        out.append({"target": t, "reachable": True, "chosen": {k: name(i) for k, i in chosen.items()},
                    "fixed": name(best), "test_acc": a_test, "test_cost": c_test, "fixed_test_acc": f_test,
                    "fixed_test_cost": fc_test})
    return out


# ---------------------------------------------------------------------------------------------------------------
# Claims, tables and the search section.

SEC = "search"
"""the findings' section tag (the findings table's first column)"""


def no_fall(section: str, who: str, n_max: int, at_one, at_max, name: str) -> dict:
    """The premise that best-of-N with a verifier (`who`) does not fall from N = 1 to n_max: it fails only where the
    interval of acc(best-of-n_max) - acc(best-of-1) over seeds is wholly below 0. A verifier that falls ranks one
    problem's answers worse than chance at the top of its scale (the more samples it chooses from, the more often
    a wrong one outscores the right ones): the claims that read it (`requires=[name]`) are untestable."""
    d = [b - a for a, b in zip(at_one, at_max)]
    m, ci = findings.seed_interval(d)
    verdict = findings.FAILS if ci[1] < -findings.TOL else findings.HOLDS
    return findings.premise(findings.finding(
        section, f"Best-of-N with {who} does not fall from N = 1 to N = {n_max}", f"acc(best-of-{n_max}) - "
        f"acc(best-of-1), {who}", m, ci, d, ">= 0", verdict, rule="fails only where the whole interval is below 0"),
        name)


def _acc(r, name, N, k=None) -> float | None:
    return None if cell(r, name, N) is None else float(per_problem(r, name, N, k=k)[0].mean())


def _compare(results, a, b, N, claim, threshold, k=None, test=findings.greater, **detail):
    """One seed's statistic is acc(a) - acc(b) on its test problems; the verdict is the t interval's over seeds."""
    if any(cell(r, a, N) is None or cell(r, b, N) is None for r in results):
        return None
    diff = [_acc(r, a, N, k) - _acc(r, b, N, k) for r in results]
    return findings.seed_check(SEC, claim, f"acc({a}@{N}) - acc({b}@{N})" + (f" at k = {k}" if k else ""), diff,
                               threshold, test=test, **detail)


def room(cfg: Config) -> tuple[float, float]:
    """The primary's statistic, a difference of two accuracies, lies in [-1, 1]."""
    return (-1.0, 1.0)


def placebo(cfg: Config) -> Config:
    """The primary's weighted vote read with a verifier that scores every step alike: majority voting itself."""
    return replace(cfg, weigh_with="uniform")


def needs(v: str, learned) -> list[str]:
    """The premises a claim that reads verifier `v` rests on: that best-of-N with it does not fall (learned ones)."""
    return [f"verifier_{v}"] if v in learned else []


def search_premises(results: list[dict]) -> list[dict]:
    """Best-of-N with each learned verifier does not fall from N = 1 to the largest N; at the easiest k, best-of-N
    with each search verifier leaves room below 1 for beam search to beat it by the tie margin."""
    r0 = results[0]
    Nmax = max(int(n) for n in r0["strategies"]["majority"]["test"])
    k0 = sorted(set(r0["k"]["test"]))[0]
    out = [no_fall(SEC, f"the learned {v}", Nmax, [_acc(r, f"bon/{v}", 1) for r in results],
                   [_acc(r, f"bon/{v}", Nmax) for r in results], f"verifier_{v}")
           for v in r0["config"]["verifiers"] if cell(r0, f"bon/{v}", Nmax)]
    for v in dict.fromkeys((*[x for x in r0["config"]["search_verifiers"] if x != "uniform"], "oracle")):
        if cell(r0, f"bon/{v}", Nmax):
            out.append(findings.premise(findings.seed_check(
                SEC, f"best-of-{Nmax} with the {v} verifier at the easiest k ({k0}) leaves room below 1 for beam "
                f"search to beat it by more than {TH['search.easy_tie'].value:g}", f"1 - acc(bon/{v}@{Nmax}) at "
                f"k = {k0}", [1 - _acc(r, f"bon/{v}", Nmax, k0) for r in results], TH["search.easy_tie"]),
                f"easy_room_{v}"))
    return out


def search_claims(results: list[dict]) -> list[dict]:
    """The search claims over seeds (test problems; one statistic per seed, t intervals): the premises, then the
    primary (does weighting the vote by a learned verifier beat the plain vote?), then the secondaries."""
    r0 = results[0]
    Nmax = max(int(n) for n in r0["strategies"]["majority"]["test"])
    ks = sorted(set(r0["k"]["test"]))
    learned = r0["config"]["verifiers"]
    lv = [v for v in r0["config"]["search_verifiers"] if v != "oracle"]
    prm = lv[0] if lv else "prm"
    weigh = r0["config"].get("weigh_with", "prm")
    who = f"({r0['config']['thinker']} thinker)"
    by = f"the learned {weigh}" if weigh in learned else f"the {weigh} verifier"
    primary = _compare(results, f"weighted/{weigh}", "majority", Nmax, f"at N = {Nmax}, weighted voting with {by} "
                       f"beats majority voting over the same samples: each answer's votes weighted by the verifier's "
                       f"scores against one vote each {who}", TH["search.beats"],
                       control="majority voting over the same samples (placebo: a verifier that scores every step "
                       "alike, whose weighted vote is majority voting)", requires=needs(weigh, learned))
    out = [*search_premises(results), primary and findings.primary(primary),
           _compare(results, f"weighted/{prm}", "weighted/orm", Nmax, f"at N = {Nmax}, weighted/{prm} beats "
                    f"weighted/orm {who}", TH["search.beats"], requires=needs(prm, learned) + needs("orm", learned)),
           findings.seed_check(SEC, f"at N = {Nmax}, majority beats greedy {who}", f"acc(majority@{Nmax}) - "
                               "acc(greedy)", [_acc(r, "majority", Nmax) - _acc(r, "greedy", 1) for r in results],
                               TH["search.vote_gain"], control="greedy", requires=[])]
    small = min(4, Nmax)
    for v in dict.fromkeys((prm, "oracle")):          # the learned PRM (the claim), then the oracle (its upper bound)
        out += [_compare(results, f"beam/{v}", f"bon/{v}", small, f"beam search beats best-of-N at a small budget "
                         f"(N = {small}) on the hardest k ({ks[-1]}), {v} verifier", TH["search.beats"], k=ks[-1],
                         requires=needs(v, learned)),
                _compare(results, f"beam/{v}", f"bon/{v}", Nmax, f"beam search loses to or ties best-of-N at a large "
                         f"budget (N = {Nmax}) on the easiest k ({ks[0]}), {v} verifier", TH["search.easy_tie"],
                         k=ks[0], test=findings.at_most, requires=needs(v, learned) + [f"easy_room_{v}"]),
                _compare(results, f"dvts/{v}", f"beam/{v}", Nmax, f"DVTS is at least as good as beam search at "
                         f"N = {Nmax} (non-inferiority), {v} verifier", TH["search.non_inferior"],
                         requires=needs(v, learned)),
                _compare(results, f"beam_dedup/{v}", f"beam/{v}", Nmax, f"beam search with search-and-learn's "
                         f"filter_duplicates beats it without at N = {Nmax}, {v} verifier", TH["search.beats"],
                         requires=needs(v, learned))]
    out += [overoptimised(results, prm, Nmax),
            _compare(results, "bon/prm", "bon/prm-mc", Nmax, f"Math-Shepherd labels get within 0.05 of the "
                     f"oracle-label PRM trained on the same outputs (best-of-{Nmax})", TH["search.label_margin"],
                     test=findings.at_most, requires=needs("prm", learned) + needs("prm-mc", learned))
            if cell(r0, "bon/prm-mc", Nmax) and cell(r0, "bon/prm", Nmax) else None,
            compute_claim(results)]
    return [f for f in out if f is not None]


def overoptimised(results: list[dict], prm: str, Nmax: int) -> dict | None:
    """Gao et al.'s over-optimisation of best-of-N with the learned PRM against the oracle's. It reads the verifier's
    own curve, so it rests on no premise (a verifier that falls is its strongest case)."""
    if not (cell(results[0], f"bon/{prm}", Nmax) and cell(results[0], "bon/oracle", Nmax)):
        return None
    lo = max(1, Nmax // 4)
    rise = [_acc(r, f"bon/{prm}", Nmax) - _acc(r, f"bon/{prm}", lo) for r in results]
    orise = [_acc(r, "bon/oracle", Nmax) - _acc(r, "bon/oracle", lo) for r in results]
    a = findings.seed_check(SEC, "", "", rise, TH["search.overopt"], test=findings.at_most)
    o = findings.seed_check(SEC, "", "", orise, 0.0)
    return findings.finding(
        SEC, f"best-of-N with the learned {prm} is over-optimised: its true accuracy stops rising over the last "
        f"4x of N (N = {lo} to {Nmax}) while the oracle's still rises", f"acc(bon/{prm}@{Nmax}) - "
        f"acc(bon/{prm}@{lo})", a["value"], a["ci95"], a["per_seed"], "<= 0 (and the oracle's rise > 0)",
        findings.both(a["verdict"], o["verdict"]), p=max(a["p"], o["p"]), source=TH["search.overopt"].source,
        oracle_rise={"value": o["value"], "ci95": o["ci95"], "per_seed": o["per_seed"]}, requires=[])


def compute_claim(results: list[dict]) -> dict:
    """Snell et al.'s compute-optimal saving at the highest accuracy target every seed reaches: the log of the token
    ratio (best single / per-k choice) over seeds, > 0, with the test accuracy gap > -0.02 (an interval over a
    ratio is not one: its log is)."""
    co = [compute_optimal(r) for r in results]
    common = [i for i in range(len(co[0])) if all(c[i]["reachable"] for c in co)]
    claim = ("the compute-optimal strategy per k needs fewer tokens than the best single strategy at matched accuracy "
             "(per-k choice cross-fitted on validation, read on test; learned verifiers only)")
    if not common:
        return findings.missing(SEC, claim, "no accuracy target reached at every k by a single strategy in every seed",
                                threshold="> 0", requires=[])
    i = common[-1]
    logr = [float(np.log(c[i]["fixed_test_cost"] / c[i]["test_cost"])) for c in co]
    gap = [c[i]["test_acc"] - c[i]["fixed_test_acc"] for c in co]
    rt = findings.seed_check(SEC, "", "", logr, TH["search.saving"])
    g = findings.seed_check(SEC, "", "", gap, TH["search.acc_gap"])
    return findings.finding(
        SEC, f"{claim}, target {co[0][i]['target']}", "log(tokens(best single) / tokens(per-k choice)) on test, "
        "tokens = generated + verifier", rt["value"], rt["ci95"], rt["per_seed"],
        "> 0 (and test accuracy gap > -0.02)", findings.both(rt["verdict"], g["verdict"]), p=max(rt["p"], g["p"]),
        source=TH["search.saving"].source, requires=[],
        accuracy_gap={"value": g["value"], "ci95": g["ci95"], "per_seed": g["per_seed"]},
        frontier=[{k: (round(x, 4) if isinstance(x, float) else x) for k, x in t.items()} for t in co[0]],
        strategies=[{"per_k": c[i]["chosen"], "single": c[i]["fixed"]} for c in co])


def table(results: list[dict], Ns=(1, 4, 16, 64)) -> str:
    """Test accuracy (mean ± std over seeds) per strategy at a few N, with compute at the largest."""
    nmax = max(int(n) for n in results[0]["strategies"]["majority"]["test"])
    Ns = [n for n in Ns if n <= nmax]
    header = ["strategy", *(f"acc @{n}" for n in Ns), f"generated tokens @{Ns[-1]}", f"verifier tokens @{Ns[-1]}",
              f"GFLOPs @{Ns[-1]}"]
    rows = []
    for name in results[0]["strategies"]:
        cells, last = [], None
        for N in Ns:
            if name == "greedy" and N > 1:     # one answer: compute stays that of N = 1
                cells.append("—")
                continue
            per = [per_problem(r, name, N) for r in results]
            cells.append(pm([p[0].mean() for p in per]))
            last = per
        gen, ver, flops = (np.mean([p[i].mean() for p in last]) for i in (1, 2, 3))
        rows.append([name, *cells, f"{gen:.1f}", f"{ver:.1f}", f"{flops / 1e9:.3f}"])
    return md_table(header, rows)


def frontier_table(results: list[dict]) -> str:
    """Compute-optimal against the best single strategy at every target: test accuracy and tokens of each, first
    seed (the claim reads one target over all seeds)."""
    rows = [[t["target"], f"{t['test_acc']:.3f} / {t['test_cost']:.0f}",
             f"{t['fixed_test_acc']:.3f} / {t['fixed_test_cost']:.0f}", t["fixed"]] if t["reachable"]
            else [t["target"], "not reached", "", ""] for t in compute_optimal(results[0])]
    return md_table(["target", "per-k choice: test acc / tokens", "best single: test acc / tokens", "single strategy"],
                    rows)


def verifier_cost_table(results: list[dict]) -> str:
    """Verifier tokens per problem at the largest N: read from the start (the comparisons) against a causal
    verifier that keeps its cache (the sensitivity row)."""
    nmax = max(int(n) for n in results[0]["strategies"]["majority"]["test"])
    rows = []
    for name in results[0]["strategies"]:
        c = [cell(r, name, nmax) for r in results]
        if "/" not in name or any(x is None or "ver_inc" not in x for x in c):
            continue
        full = np.mean([unpack_ints(x["ver"]).mean() for x in c])
        inc = np.mean([unpack_ints(x["ver_inc"]).mean() for x in c])
        rows.append([f"{name}@{nmax}", f"{full:.0f}", f"{inc:.0f}"])
    return md_table(["strategy", "verifier tokens, re-read", "verifier tokens, incremental"], rows)


def search_page(results: list[dict], out: str, fs: list[dict]) -> str:
    """The search section: plots (out/search/: acc_vs_n.png, acc_vs_compute.png, tokens.png), the tables and the
    findings `fs` (search_claims(results))."""
    plot_curves(results, os.path.join(out, "search", "acc_vs_n.png"), "N")
    plot_curves(results, os.path.join(out, "search", "acc_vs_compute.png"), "flops")
    plot_tokens(results, os.path.join(out, "search", "tokens.png"))
    c = results[0]["config"]
    P = len(results[0]["k"]["test"])
    task, k0 = task_of(results[0]), min(results[0]["k"]["test"])
    whole = (f', whose "test" quarter holds {len(task.space(k0, "test"))}' if task.enumerable(k0) else "")
    return f"""## Verifiers and search

> **Question.** With a thinker whose chains err and verifiers learned from its own samples, which search turns
> more test-time compute into accuracy: best-of-N, weighted majority, PRM-guided beam search or DVTS? Where is a
> learned verifier fooled, and what does the compute-optimal strategy per k save?

![accuracy against N](search/acc_vs_n.png)

![accuracy against compute](search/acc_vs_compute.png)

![accuracy against generated and verifier tokens](search/tokens.png)

{table(results)}

{P} distinct test problems (up to {c['n_test']} per k; {results[0]['k']['test'].count(k0)} at k = {k0}{whole})
and up to {c['n_val']} validation problems per k, from the "test" and "val" quarters of the problem space (no
verifier trains on them); the {c['thinker']} thinker writes forced {c['force']} chains at temperature
{c['temperature']}; seeds {', '.join(str(r['seed']) for r in results)} (mean ± std over seeds). Every method
scores an output by `{c['agg']}` of its step scores. Beam search and DVTS are search-and-learn's (M = {c['width']};
`beam_dedup` with its filter_duplicates). Compute: generated tokens include the forced format token; verifier
tokens = prompt + output per scored sequence, every round re-read; FLOPs = 2 · P_gen · (prompt + generated) +
2 · P_ver · verifier tokens. Chance (the best blind guess) is
{chance_text(task, sorted(set(results[0]['k']['test'])))}.

**Compute-optimal per k against the best single strategy** (first seed; the per-k choice is cross-fitted on the
validation problems, both are read on test):

{frontier_table(results)}

**Verifier cost, a sensitivity row**: a causal verifier that keeps its cache reads each step once:

{verifier_cost_table(results)}

**Findings** (95 % t intervals over seeds of each seed's statistic): first the premises, what the claims rest on
(best-of-N with a learned verifier that falls from N = 1 to N = {c['n_max']}, its interval wholly below 0, makes the
claims that read it untestable), then the primary claim, whose control is majority voting over the same samples and
whose placebo weighs the vote with a verifier that scores every step alike (weighted voting is then majority voting,
ties and all), then the secondary ones:

{findings.table(fs)}

*Papers:* Lightman et al. 2023 (arXiv 2305.20050); Snell et al. 2024 (arXiv 2408.03314); Math-Shepherd (Wang et
al. 2023, arXiv 2312.08935); Gao et al. 2022 (arXiv 2210.10760); HF search-and-learn (beam search, DVTS).
*Explore:* `reasonlab search --methods beam dvts --width 2`, `--agg prod`, `--thinker base` (the contrast).
"""


def headline(results: list[dict], fs: list[dict] | None = None) -> str:
    """One line for the lab's summary table, computed from the findings (`fs`: search_claims(results), if computed)."""
    fs = search_claims(results) if fs is None else fs
    nmax = max(int(n) for n in results[0]["strategies"]["majority"]["test"])
    acc = {n: np.mean([per_problem(r, n, nmax if n != "greedy" else 1)[0].mean() for r in results])
           for n in ("greedy", "majority", "weighted/prm", "bon/oracle") if cell(results[0], n, 1)}
    fs = [f for f in fs if findings.kind_of(f) != findings.PREMISE]
    held = sum(f["verdict"] == "holds" for f in fs)
    return (", ".join(f"{n} {v:.3f}" for n, v in acc.items()) + f" (N = {nmax}); {held}/{len(fs)} findings hold")


# ---------------------------------------------------------------------------------------------------------------
# The search section's plots.

METHOD_COLOR = {"greedy": "k", "majority": "#555555", "bon": "#4C72B0", "weighted": "#DD8452", "beam": "#55A868",
                "beam_dedup": "#8172B2", "dvts": "#C44E52"}
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


def chance(res: dict, k: int | None = None) -> float:
    """The best blind guess's accuracy on the test problems (`Task.chance`; of one k, or over all of them)."""
    task = task_of(res)
    if k is not None:
        return task.chance(k)
    return float(np.mean([task.chance(kk) for kk in res["k"]["test"]]))


def chance_text(task: Task, ks: list[int]) -> str:
    """Chance in words: one number where it is the same at every k (digits: 0.1), else its range over k."""
    cs = [task.chance(k) for k in ks]
    return f"{cs[0]:.3g}" if len(set(cs)) == 1 else f"{min(cs):.3g} to {max(cs):.3g} (by k)"


def plot_curves(results: list[dict], path: str, x: str = "N") -> str:
    """Test accuracy against N (or FLOPs) for every strategy; one panel for all k, then one per k; band = ± std
    over seeds; grey: chance (`Task.chance`; digits: 0.1)."""
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
        c = chance(results[0], k)
        ax.axhline(c, color="grey", ls=":", lw=1, label=f"chance ({c:.3g})")
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
        ax.axhline(chance(results[0]), color="grey", ls=":", lw=1)
        log_x(ax)
        ax.set_xlabel({"gen": "generated tokens per problem", "ver": "verifier tokens per problem"}[x])
    axes[0].set_ylabel("test accuracy (all k)")
    axes[1].legend(fontsize=6, ncol=2)
    return save(fig, path)


# ---------------------------------------------------------------------------------------------------------------
# The verifiers' section: their quality (step and outcome AUROC, calibration, training cost) over seeds.

def _seed_check(per_seed, test, thr) -> tuple[float, float, float, str]:
    """findings.seed_interval over the seeds that have a value (an AUROC is NaN when a class is missing), judged by
    test (findings.greater / at_most): mean, CI, verdict."""
    xs = [x for x in per_seed if x == x]
    if len(xs) < 2:
        return float(np.mean(xs)) if xs else float("nan"), float("nan"), float("nan"), \
            "inconclusive (fewer than 2 seeds)"
    m, ci = findings.seed_interval(xs)
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
    a2.set_xlabel("k (problem size)")
    a2.set_ylabel("step AUROC vs oracle")
    a2.set_title("step AUROC per k")
    a1.legend(fontsize=8)
    a2.legend(fontsize=8)
    return save(fig, path)


def verifiers_page(results: list[dict], out: str, margin: float = 0.05, time_budget: float = 30.0) -> str:
    """The verifiers' section: quality table (mean ± std over seeds), the Math-Shepherd margin as a check, the plot."""
    kinds = list(results[0]["kinds"])
    plot_quality(results, os.path.join(out, "verifier_quality.png"))
    header = ["verifier", "step AUROC to the first error", "step AUROC, all steps", "chain-step AUROC",
              "step ECE to the first error", "outcome AUROC last / min / prod", "train s"]
    rows = []
    for kind in kinds:
        q = [r["kinds"][kind] for r in results]
        rows.append([kind, pm([x[FIRST] for x in q]), pm([x["step_auroc"] for x in q]),
                     pm([x["chain_step_auroc"] for x in q]),
                     pm([x["first_error_ece"] for x in q]),
                     " / ".join(pm([x["outcome_auroc"][a] for x in q]) for a in ("last", "min", "prod")),
                     pm([x["train"]["seconds"]["total"] for x in q], "{:.1f}")])
    lines = []
    if "prm" in kinds and "prm-mc" in kinds:
        gap = [r["kinds"]["prm"][FIRST] - r["kinds"]["prm-mc"][FIRST] for r in results]
        m, lo, hi, verdict = _seed_check(gap, findings.at_most, margin)
        lines.append(f"Math-Shepherd labels within {margin} step AUROC (to the first error) of the oracle-label PRM: "
                     f"gap (prm − prm-mc) "
                     f"{m:.3f}, 95 % CI [{lo:.3f}, {hi:.3f}] over {len(gap)} seeds (per seed "
                     + ", ".join(f"{g:.3f}" for g in gap) + f"): **{verdict}**.")
    if "prm" in kinds and "orm" in kinds:
        gap = [r["kinds"]["prm"][FIRST] - r["kinds"]["orm"][FIRST] for r in results]
        m, lo, hi, verdict = _seed_check(gap, findings.greater, 0.0)
        lines.append(f"The PRM separates steps better than the ORM (step AUROC to the first error, gap prm − orm > 0): "
                     f"{m:.3f}, 95 % CI "
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

{md_table(header, rows)}

{chr(10).join(l + chr(10) for l in lines)}
The {results[0]['thinker']} thinker's samples (temperature 1, formats forced S / T / A) of held-out problems
({n_out} outputs per seed, problems from a quarter of problem space no verifier trains on); seeds {seeds};
mean ± std over seeds. Step AUROC: steps (chain states and the answer) scored against the rule's step labels (0.5 =
chance), on the steps up to each output's first wrong step (what PRM800K labels, and all a weakest-step score reads:
a step after an error is wrong by inheritance) and on all steps; outcome AUROC: the aggregated score against the
final answer being right. ECE over 10 equal-width bins (the reliability plot: all steps). The ORM learns from the
outcome only (every
step), the PRM from the rule's step labels up to the first error, prm-mc from rollout shares (every step).

*Papers:* ORM (Cobbe et al. 2021, arXiv 2110.14168); PRM (Lightman et al. 2023, arXiv 2305.20050);
Math-Shepherd (Wang et al. 2023, arXiv 2312.08935).
*Explore:* `VerifierConfig(rollouts=..., steps=..., init="scratch")`, `verifier_quality(v, thinker)`.
"""


# ---------------------------------------------------------------------------------------------------------------
# The experiment.

def claims(rs: list[dict]) -> list[dict]:
    return search_claims([r["search"] for r in rs])


def render_verifiers(rs: list[dict], out: str) -> tuple[str, str]:
    q = [r["verifiers"] for r in rs]
    md = verifiers_page(q, out)        # writes out/verifier_quality.png, linked from report.md beside it
    head = ", ".join(f"{k} step AUROC {pm([x['kinds'][k][FIRST] for x in q])}" for k in q[0]["kinds"]) + \
        " (to the first error)"
    return md, head


def render_search(rs: list[dict], out: str) -> tuple[str, str]:
    res = [r["search"] for r in rs]
    fs = findings.gate(search_claims(res))    # computed once for the page and the line, the premises applied
    md = search_page(res, out, fs)
    return md, headline(res, fs)


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    return [render_search(rs, out), render_verifiers(rs, out)]


register(Experiment("search", Config, run, claims, render, depends=on_erring(VerifierConfig),
                    keys=("verifiers", "search"), run_cost=52, render_cost=6.1, takes_checkpoint=False, room=room,
                    placebo=placebo,
                    quick=Config(n_test=4, n_val=3, n_max=4, quick_verifiers=True, thinker="quick")))
