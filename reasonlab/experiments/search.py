"""The search experiment: learned verifiers on a thinker whose chains err, their quality against the rule, and
search with them (best-of-N, weighted majority, beam search, DVTS: methods.search) against voting without one.

One seed: each learned verifier (ORM, PRM, Math-Shepherd PRM) is trained on the thinker's own samples and measured
against the oracle on held-out problems (`verifier_quality.verifier_quality`); then every method x verifier x N runs on
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

import time
from dataclasses import asdict, dataclass, replace
from typing import Literal

import numpy as np
import torch

from .. import tasks
from ..core.config import NS, Count, NTest, Sampled
from ..core.pool import sample_pool
from ..core.problems import problems_per_k, test_problems
from ..core.seeds import hashed_seed
from ..io.pack import pack_bits, pack_ints
from ..methods.config import KINDS, Kind, VerifierConfig
from ..methods.search import Scorer, best_of_n, chunked, weighted
from ..methods.tts import majority
from ..methods.verifier import OracleVerifier, UniformVerifier, train_verifier
from ..methods.verifier_quality import verifier_quality
from ..stats import findings
from ..stats.summary import pm
from ..train.zoo import on_erring, thinker_model
from . import Experiment, register, replicate_seed, task_of
from .search_report import FIRST, TRAIN_KEYS, cell, compute_optimal, headline, per_problem, search_page, verifiers_page
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
    n_val: Count = 50
    """validation problems per k (the compute-optimal selection)"""
    n_test: NTest = 100
    """test problems per k (every reported number, and the verifiers' quality check); disjoint from validation and
    from every verifier's training"""
    n_max: Count = 64
    """largest N (a power of two up to 64); N runs over 1, 2, 4, ... up to it"""
    width: int = 4
    """M, the beam width (expansions per beam per step) of beam search and DVTS (min(M, N) where N < M)"""
    temperature: Sampled = 1.0
    """sampling temperature of every method"""
    agg: Literal["last", "min", "prod"] = "min"
    """how an output's step scores become one score, in every method (search-and-learn's agg_strategy; its default
    is "last": "min" makes the oracle's score the process check, task.check_chain)"""
    verifiers: tuple[Kind, ...] = KINDS
    """learned verifiers to train, measure and search with; the oracle always runs too"""
    search_verifiers: tuple[Literal[Kind, "oracle"], ...] = ("prm", "oracle")
    """verifiers that guide beam search and DVTS (each costs a search per N)"""
    methods: tuple[Literal["bon", "weighted", "beam", "beam_dedup", "dvts"], ...] = SEARCH_METHODS
    """search methods to run; greedy and majority always run"""
    quick_verifiers: bool = False
    """train the verifiers small (tests and quick runs: the numbers mean little)"""
    weigh_with: Literal["prm", "uniform"] = "prm"
    """the verifier whose weighted vote the primary claim reads against majority voting: the learned PRM, or one
    that scores every step alike ("uniform", the placebo: its weighted vote is majority voting, over a pool of
    samples of its own)"""

    def validate(self) -> None:
        if self.n_max not in NS:
            raise ValueError(f"invalid n_max {self.n_max}: use one of {', '.join(map(str, NS))}")
        if self.width < 1 or self.width & (self.width - 1):
            raise ValueError(f"invalid width {self.width}: a power of two >= 1")
        for v in self.search_verifiers:
            if v not in (*self.verifiers, "oracle"):
                raise ValueError(f"search verifier {v!r} must be oracle or one of --verifiers")
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
    return VerifierConfig(n_train=10, steps=10, rollouts=2, batch=32) if cfg.quick_verifiers else VerifierConfig()


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
    pool = sample_pool(model, probs, cfg.n_max, [cfg.force], cfg.temperature,
                       seed=hashed_seed("search", seed, split, "pool"), keep_outputs=True)
    timing[f"sample_{split}"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    flat_d, flat_o = pool.flat()
    scores = {k: sc.values(flat_d, flat_o, cfg.agg).reshape(len(probs), cfg.n_max) for k, sc in scorers.items()}
    for sc in scorers.values():
        sc.add_prefixes(flat_d, flat_o)
    timing[f"score_{split}"] = round(time.perf_counter() - t, 1)
    vt = task_of(res).prompt_len + pool.length                      # verifier tokens per sample
    voted = {k: (pool, scores[k], vt) for k in scorers}             # the pool each weighted vote reads
    if cfg.weigh_with == "uniform":    # the placebo: its weighted vote (majority voting) over samples of its own
        twin = sample_pool(model, probs, cfg.n_max, [cfg.force], cfg.temperature, seed=replicate_seed(seed, split),
                           keep_outputs=True)
        d, o = twin.flat()
        voted["uniform"] = (twin, scorers["uniform"].values(d, o, cfg.agg).reshape(len(probs), cfg.n_max),
                            task_of(res).prompt_len + twin.length)
    for N in cfg.Ns:
        gen = pool.length[:, :N].sum(1)
        put(res, "majority", split, N, majority(pool, N), gen, np.zeros(len(probs)))
        for k in scorers:
            if "bon" in cfg.methods:
                put(res, f"bon/{k}", split, N, best_of_n(pool, scores[k], N), gen, vt[:, :N].sum(1))
            if "weighted" in cfg.methods:
                p, s, v = voted[k]
                put(res, f"weighted/{k}", split, N, weighted(p, s, N), p.length[:, :N].sum(1), v[:, :N].sum(1))


def searched(res: dict, cfg: Config, seed: int, model, scorers: dict, split: str, probs: list) -> None:
    """Beam search (with and without filter_duplicates) and DVTS with each search verifier at every N, each (search,
    N) from a stream of its own that every verifier shares (the verifiers compared on the same draws)."""
    t = time.perf_counter()
    task = tasks.of(probs)
    truth = np.array([task.answer(p) for p in probs])
    device = next(model.parameters()).device
    for m in (m for m in SEARCHES if m in cfg.methods):
        for k in cfg.search_verifiers:
            for N in cfg.Ns:
                gen = torch.Generator(device=device).manual_seed(hashed_seed("search", seed, split, m, N))
                r = chunked(m, model, scorers[k], probs, N, cfg.width, gen, force=cfg.force,
                            temperature=cfg.temperature, agg=cfg.agg)
                ans = np.array([-1 if (a := task.parse(o)["answer"]) is None else a for o in r["pick"]])
                put(res, f"{m}/{k}", split, N, ans == truth, r["gen_tokens"], r["ver_tokens"], r["ver_tokens_inc"])
    res["timing"][f"search_{split}"] = round(time.perf_counter() - t, 1)


# ---------------------------------------------------------------------------------------------------------------
# Claims, tables and the search section.

SEC = "search"
"""the findings' section tag (the findings table's first column)"""


def no_fall(section: str, who: str, curve: dict[int, list[float]], name: str) -> dict:
    """The premise that best-of-N with a verifier (`who`) does not fall anywhere along N by more than the tolerance
    (TH["search.no_fall"]). `curve` maps each N to its per-seed accuracies. The statistic is the curve's largest fall,
    acc(N1) - acc(N2) for the N1 < N2 where the mean over seeds falls most (chosen on the means, read per seed); the
    premise holds only where the interval's upper end is within the tolerance: a claim resting on a verifier must
    have it shown not to fall, not merely not shown to fall. A verifier that falls ranks one problem's answers worse
    than chance at the top of its scale (the more samples it chooses from, the more often a wrong one outscores the
    right ones): the claims that read it (`requires=[name]`) are untestable."""
    curve = {int(n): v for n, v in curve.items()}
    Ns = sorted(curve)
    mean = {n: float(np.mean(curve[n])) for n in Ns}
    n1, n2 = max(((a, b) for i, a in enumerate(Ns) for b in Ns[i + 1:]), key=lambda ab: mean[ab[0]] - mean[ab[1]])
    d = [a - b for a, b in zip(curve[n1], curve[n2])]
    m, ci = findings.seed_interval(d)
    tol = TH["search.no_fall"]
    verdict = findings.HOLDS if ci[1] <= tol.value + findings.TOL else findings.FAILS
    return findings.premise(findings.finding(
        section, f"Best-of-N with {who} does not fall by more than {tol.value:g} anywhere from N = {Ns[0]} to "
        f"N = {Ns[-1]}", f"largest fall along N: acc(best-of-{n1}) - acc(best-of-{n2}), {who}", m, ci, d,
        f"<= {tol.value:g} (the interval's upper end)", verdict, source=tol.source,
        rule="holds only where the whole interval is at most the tolerance"), name)


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
    """The primary's weighted vote read with a verifier that scores every step alike, over samples of its own:
    majority voting run a second time (an independent replicate)."""
    return replace(cfg, weigh_with="uniform")


def needs(v: str, learned) -> list[str]:
    """The premises a claim that reads verifier `v` rests on: that best-of-N with it does not fall (learned ones)."""
    return [f"verifier_{v}"] if v in learned else []


def search_premises(results: list[dict]) -> list[dict]:
    """Best-of-N with each learned verifier does not fall along N beyond the tolerance; at the easiest k, best-of-N
    with each search verifier leaves room below 1 for beam search to beat it by the tie margin."""
    r0 = results[0]
    Nmax = max(int(n) for n in r0["strategies"]["majority"]["test"])
    k0 = sorted(set(r0["k"]["test"]))[0]
    Ns = sorted(int(n) for n in r0["strategies"]["majority"]["test"])
    out = [no_fall(SEC, f"the learned {v}", {N: [_acc(r, f"bon/{v}", N) for r in results] for N in Ns},
                   f"verifier_{v}") for v in r0["config"]["verifiers"] if cell(r0, f"bon/{v}", Nmax)]
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
                       control="majority voting over the same samples", requires=needs(weigh, learned))
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


QUESTION = """With a thinker whose chains err and verifiers learned from its own samples, which search turns more
test-time compute into accuracy: best-of-N, weighted majority, PRM-guided beam search or DVTS? Where is a learned
verifier fooled, and what does the compute-optimal strategy per k save?"""
PAPERS = """Lightman et al. 2023 (arXiv 2305.20050); Snell et al. 2024 (arXiv 2408.03314); Math-Shepherd (Wang et
al. 2023, arXiv 2312.08935); Gao et al. 2022 (arXiv 2210.10760); HF search-and-learn (beam search, DVTS)."""
EXPLORE = """`reasonlab search --methods beam dvts --width 2`, `--agg prod`, `--thinker base` (the contrast)."""

register(Experiment("search", Config, run, claims, render, question=QUESTION, papers=PAPERS, explore=EXPLORE,
                    depends=on_erring(VerifierConfig), streams=1,
                    keys=("verifiers", "search"), run_cost=52, render_cost=6.1, takes_checkpoint=False, room=room,
                    placebo=placebo,
                    quick=Config(n_test=4, n_val=3, n_max=4, quick_verifiers=True, thinker="quick")))
