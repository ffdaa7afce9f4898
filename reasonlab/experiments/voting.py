"""Self-consistency needs errors that vary: majority voting on a thinker whose misreadings are fixed in its weights
against one whose misreadings are drawn afresh for every sample (Wang et al. 2022, arXiv 2203.11171, self-consistency:
sample several chains, take the most frequent answer).

The lab's erring thinker reads its task's words (digits: the digits) through one noise direction fixed in its
embeddings: a problem it misreads it misreads in every sample, so a vote repeats the error. The per-sample thinker
reads through a fresh direction in each sample (sample j decodes with the base model misread by draw j), at a noise
scale calibrated, like the erring thinker's, so that greedy forced S at the largest k (digits: 8) is right on 45 % of
probe problems on average over draws. Both write forced S chains at temperature 1; greedy is one greedy decode (the
per-sample thinker's: a draw of its own). Every draw and stream is hashed from (voting, seed, purpose): `draw`.

The per-sample thinker's vote converges by its design (a premise); the open question, the primary claim, is the
erring thinker's: how much of its error is fixed in the weights, and how much a vote over its samples still fixes.
Its control is the same thinker's greedy decode; its placebo votes at temperature 0 over a second erring thinker
(its misreading drawn on a stream of its own): its greedy output, an independent replicate of the control.

Beside the vote, best-of-N with learned verifiers (Lightman et al. 2023, arXiv 2305.20050, Fig. 3: PRM above ORM,
both above majority voting). Each thinker gets an ORM (every step labelled with the outcome; a sample scored by its
last step) and a PRM (the rule's step labels; scored by its weakest step, as Lightman et al. and Math-Shepherd do),
trained on forced S samples of training problems (methods.verifier), read through the search experiment's scorer
(an output that ends without an answer scores 0): the erring thinker's on its own samples, the per-sample thinker's
on samples that draws of their own wrote (none a test sample's), from the base model's weights. A claim that reads a
verifier rests on a premise: its best-of-N does not fall along N beyond a tolerance (search.no_fall).

Then search over steps (Snell et al. 2024, arXiv 2408.03314): search-and-learn's beam search and DVTS, guided by
each thinker's PRM, at SEARCH_NS; a fresh reader writes each per-sample candidate step (methods.readers).
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass, replace

import numpy as np
import torch

from .. import tasks
from ..core.config import NS, Count, NTest, Steps, Temperature
from ..core.evaluate import evaluate
from ..core.model import GPT
from ..core.pool import pool_of, sample_pool
from ..core.problems import as_task, test_problems
from ..core.sampling import generate, generate_n
from ..core.seeds import hashed_seed
from ..io.report import band, md_table, plt, save
from ..methods.readers import Readers
from ..methods.search import Scorer, best_of_n, chunked
from ..methods.tts import majority
from ..methods.verifier import Verifier, VerifierConfig, train_verifier, training_problems
from ..stats import findings
from ..stats.summary import pm
from ..tasks import Problem, Task
from ..train.erring import calibrate_misread, misread, reachable
from ..train.zoo import erring_cfg, on_erring, thinker_model
from . import Experiment, opening, reading, register, replicate_seed
from .search import no_fall
from .thresholds import THRESHOLDS as TH


def draw(seed: int, purpose: str, j: int = 0) -> int:
    """Misreading draw j of a seed for a purpose ("sample", "greedy", "calibrate", "verifier"), hashed: no draw is
    another purpose's, another seed's or an erring thinker's own (drawn from its seed)."""
    return hashed_seed("voting", seed, purpose, j)


VERIFIER_DRAWS = 16
"""draws that write the per-sample thinker's verifier training samples (training problem i: draw i mod 16)"""
SEARCH_NS = (4, 16)
"""N at which beam search and DVTS run (the per-sample thinker's beams share no KV cache: N = 64 costs too much)"""
WIDTH = 4
"""M, the beam width of beam search and DVTS (search-and-learn's default)"""
AGG = {"orm": "last", "prm": "min"}
"""how each verifier's step scores make a sample's score (verifier.aggregate): the ORM's last step (its outcome
estimate), the PRM's weakest step (Lightman et al. 2023; Math-Shepherd)"""


@dataclass
class Config:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    n_test: NTest = 100
    """test problems per k"""
    samples: Count = 64
    """samples per problem (the largest N voted over)"""
    calib_draws: Count = 4
    """noise draws averaged per bisection step when calibrating the per-sample thinker"""
    n_train: Count = 200
    """training problems per k for each verifier (ORM and PRM; two forced S samples each, from the thinker scored)"""
    verifier_steps: Steps = 300
    """AdamW steps for each verifier (VerifierConfig's default; the quick lab's few samples need few)"""
    temperature: Temperature = 1.0
    """sampling temperature of every sample (the vote, best-of-N, the searches); 0: the vote is over a second erring
    thinker, made on a stream of its own, every sample its greedy output (the primary's placebo: an independent
    replicate of the control)"""

    def validate(self) -> None:
        if self.samples < SEARCH_NS[0]:
            raise ValueError(f"samples must be >= {SEARCH_NS[0]}: best-of-N is read beside the smallest search")


def reader(base: GPT, sigma: float, draw: int, task: str | Task = "digits") -> GPT:
    """The base model reading its task's words through noise draw `draw` at scale sigma (train.erring.misread)."""
    return misread(copy.deepcopy(base), sigma, draw, task)


def calibrate(base: GPT, seed: int, draws: int, task: str | Task = "digits") -> float:
    """The noise scale at which greedy forced S at the erring thinker's k (digits: 8) is right on its recipe's share
    of its probe (or chance + 0.1 where higher: modprod's noise only reaches its blind-guess rate), on average over
    `draws` draws (train.erring.calibrate_misread over these draws' directions; sigma in [0, 1], else [0, 4])."""
    m = reachable(erring_cfg(seed, task)["misread"], task)
    return calibrate_misread(base, m, [draw(seed, "calibrate", j) for j in range(draws)], task, (1.0, 4.0))


def verifiers(thinker: GPT, seed: int, n_per_k: int, steps: int, cache, samples=None,
              task: str | Task = "digits") -> dict[str, Verifier]:
    """An ORM and a PRM trained (`steps` AdamW steps) on `thinker`'s forced S samples of n_per_k training problems
    per k, or on `samples` (problems, outputs) with `thinker` as the start (cached)."""
    return {kind: train_verifier(kind, thinker, seed, VerifierConfig(kind=kind, n_train=n_per_k, formats=("S",),
                                                                     format_weights=(1.0,), steps=steps),
                                 cache=cache, log=None, samples=samples, task=task)
            for kind in AGG}


def per_sample_training(base: GPT, sigma: float, seed: int, n_per_k: int,
                        task: str | Task = "digits") -> tuple[list[Problem], list]:
    """Two forced S samples at temperature 1 of each verifier training problem, problem i written by reader draw
    draw(seed, "verifier", i mod VERIFIER_DRAWS): (problem per row, output ids per row)."""
    task = as_task(task)
    probs = training_problems(n_per_k, seed, task)
    gen = torch.Generator().manual_seed(hashed_seed("voting", seed, "verifier samples"))
    rows, outs = [], []
    for j in range(VERIFIER_DRAWS):
        ps = probs[j::VERIFIER_DRAWS]
        if ps:
            model = reader(base, sigma, draw(seed, "verifier", j), task)
            outs += generate_n(model, [task.prompt_ids(p) for p in ps], 2, gen, 1.0, force=["S"])
            rows += [p for p in ps for _ in range(2)]
    return rows, outs


def bon(pool, scorers: dict[str, Scorer]) -> dict:
    """Best-of-N accuracy at every N in NS for each verifier, on the pool's kept outputs, each scored as the search
    experiment scores it (Scorer.values with the verifier's AGG: an output that ends without an answer scores 0;
    each distinct problem and output read once)."""
    ps, outs = pool.flat()
    res = {}
    for kind, sc in scorers.items():
        scores = sc.values(ps, outs, AGG[kind]).reshape(len(pool.problems), pool.n)
        res[kind] = {N: float(best_of_n(pool, scores, N).mean()) for N in NS if N <= pool.n}
    return res


def searched(model: GPT | Readers, scorer: Scorer, probs: list[Problem], seed: int, n_max: int, arm: str,
             temperature: float = 1.0) -> dict:
    """Accuracy of PRM-guided beam search and DVTS (methods.search; the PRM's weakest step scores, M = WIDTH) at
    each N in SEARCH_NS up to n_max (forced S at `temperature`; a stream per arm, search, N): {search: {N: acc}}."""
    device = next((model.model if isinstance(model, Readers) else model).parameters()).device
    task = tasks.of(probs)
    truth = [task.answer(p) for p in probs]
    out = {}
    for name in ("beam", "dvts"):
        out[name] = {}
        for N in (n for n in SEARCH_NS if n <= n_max):
            gen = torch.Generator(device=device).manual_seed(hashed_seed("voting", seed, arm, name, N))
            picks = chunked(name, model, scorer, probs, N, WIDTH, gen, force="S", temperature=temperature,
                            agg=AGG["prm"])["pick"]
            out[name][N] = float(np.mean([task.parse(o)["answer"] == t for o, t in zip(picks, truth)]))
    return out


def curve(pool, greedy: float, vs: dict[str, Verifier], model: GPT | Readers, seed: int, temperature: float,
          arm: str) -> dict:
    """Greedy, majority@N, best-of-N with each verifier, and the PRM-guided searches of `model`."""
    scorers = {k: Scorer(v) for k, v in vs.items()}
    return {"greedy": greedy, "majority": {N: float(majority(pool, N).mean()) for N in NS if N <= pool.n},
            "bon": bon(pool, scorers),
            "search": searched(model, scorers["prm"], pool.problems, seed, pool.n, arm, temperature)}


def run(cfg: Config, seed: int, env) -> dict:
    task = tasks.get(cfg.task)
    probs = test_problems(cfg.n_test, "voting", seed, task=task)
    fixed = thinker_model("erring", seed, env.cache, env.device, task=task)
    # at temperature 0 (the placebo) the vote is over a second erring thinker, its misreading drawn on a stream of
    # its own: every sample its greedy output, so the vote replicates the control independently
    voter = fixed if cfg.temperature else thinker_model("erring", seed, env.cache, env.device, task=task,
                                                        stream=replicate_seed(seed, "erring"))
    pool = sample_pool(voter, probs, cfg.samples, force=["S"], temperature=cfg.temperature,
                       seed=hashed_seed("voting", seed, "fixed samples"), keep_outputs=True)
    out = {"fixed": curve(pool, evaluate(fixed, probs, force=["S"])["acc"],
                          verifiers(fixed, seed, cfg.n_train, cfg.verifier_steps, env.cache, task=task), fixed,
                          seed, cfg.temperature, "fixed")}
    base = env.base(seed, cfg.task)
    sigma = calibrate(base, seed, cfg.calib_draws, task)
    gen = torch.Generator().manual_seed(hashed_seed("voting", seed, "per-sample samples"))
    prompts = [task.prompt_ids(p) for p in probs]
    outs = [generate(reader(base, sigma, draw(seed, "sample", j), task), prompts, gen, cfg.temperature, force=["S"])
            for j in range(cfg.samples)]
    pool = pool_of(probs, [[outs[j][i] for j in range(cfg.samples)] for i in range(len(probs))])
    greedy = evaluate(reader(base, sigma, draw(seed, "greedy"), task), probs, force=["S"])["acc"]
    vs = verifiers(base, seed, cfg.n_train, cfg.verifier_steps, env.cache,
                   samples=per_sample_training(base, sigma, seed, cfg.n_train, task), task=task)
    out["per_sample"] = {**curve(pool, greedy, vs, Readers(base, sigma, task), seed, cfg.temperature, "per_sample"),
                         "sigma": sigma}
    return out


def gain(r: dict, arm: str) -> float:
    """acc(majority at the largest N) - acc(greedy) of one thinker."""
    top = max(r[arm]["majority"])
    return r[arm]["majority"][top] - r[arm]["greedy"]


def margin(r: dict, arm: str, a: str, b: str) -> float:
    """At the top N: accuracy of `a` minus that of `b`, each "prm", "orm" (best-of-N) or "majority"."""
    top = max(r[arm]["majority"])
    acc = lambda m: r[arm]["majority"][top] if m == "majority" else r[arm]["bon"][m][top]   # noqa: E731
    return acc(a) - acc(b)


THINKERS = (("per_sample", "errors drawn per sample", "per-sample thinker"),
            ("fixed", "errors fixed in the weights", "erring thinker"))
"""(result key, what its errors are, who it is), the per-sample thinker first as in the claims"""
SEC = "voting"
"""the findings' section tag"""


def room(cfg: Config) -> tuple[float, float]:
    """The primary's statistic, a difference of two accuracies, lies in [-1, 1]."""
    return (-1.0, 1.0)


def placebo(cfg: Config) -> Config:
    """The vote drawn at temperature 0 from a second erring thinker made on a stream of its own: every sample its
    greedy output, so majority@N is an independent replicate of the control (greedy)."""
    return replace(cfg, temperature=0.0)


def premises(rs: list[dict]) -> list[dict]:
    """What the claims rest on: the per-sample thinker's vote converges (its design), the erring thinker leaves
    room above its greedy accuracy, and best-of-N with each verifier does not fall along N beyond the tolerance."""
    top = max(rs[0]["fixed"]["majority"])
    out = [findings.premise(findings.seed_check(
               SEC, f"With errors drawn per sample, majority@{top} beats greedy by more than 5 points (the per-sample "
               "thinker's design: a fresh misreading per sample)", f"acc(majority@{top}) - acc(greedy), per-sample "
               "thinker", [gain(r, "per_sample") for r in rs], TH["voting.vote_margin"]), "per_sample_votes"),
           findings.premise(findings.seed_check(
               SEC, "The erring thinker errs: its greedy accuracy leaves more than 5 points for a vote to gain",
               "1 - acc(greedy), erring thinker", [1 - r["fixed"]["greedy"] for r in rs], TH["voting.vote_margin"]),
               "fixed_errs")]
    for arm, _, who in THINKERS:
        curve = lambda kind: {N: [r[arm]["bon"][kind][N] for r in rs] for N in rs[0][arm]["bon"][kind]}  # noqa: E731
        out += [no_fall(SEC, f"the {who}'s {kind.upper()}", curve(kind), f"{arm}_{kind}") for kind in AGG]
    return out


def claims(rs: list[dict]) -> list[dict]:
    top = max(rs[0]["fixed"]["majority"])
    fs = premises(rs) + [
        findings.primary(findings.seed_check(
            SEC, f"With errors fixed in the weights (the erring thinker), majority@{top} over its samples at "
            f"temperature 1 beats its greedy decode by more than 5 points", f"acc(majority@{top}) - acc(greedy), "
            "erring thinker", [gain(r, "fixed") for r in rs], TH["voting.vote_margin"],
            control="the same thinker's greedy decode (placebo: a second erring thinker's)", requires=["fixed_errs"])),
        findings.seed_check(SEC, "Voting gains more when the errors are drawn per sample than when they are fixed in "
                            "the weights", "gain(per-sample) - gain(fixed)",
                            [gain(r, "per_sample") - gain(r, "fixed") for r in rs], TH["voting.varies"],
                            control="the fixed-error thinker", requires=["per_sample_votes", "fixed_errs"])]
    for arm, errors, who in THINKERS:          # Lightman et al.'s ordering, PRM > ORM > majority, on each thinker
        fs += [findings.seed_check(SEC, f"With {errors}, best-of-{top} with the PRM beats best-of-{top} with the ORM",
                                   f"acc(best-of-{top}, PRM) - acc(best-of-{top}, ORM), {who}",
                                   [margin(r, arm, "prm", "orm") for r in rs], TH["voting.prm_over_orm"],
                                   control="best-of-N with the ORM", requires=[f"{arm}_prm", f"{arm}_orm"]),
               findings.seed_check(SEC, f"With {errors}, best-of-{top} with the ORM beats majority@{top}",
                                   f"acc(best-of-{top}, ORM) - acc(majority@{top}), {who}",
                                   [margin(r, arm, "orm", "majority") for r in rs], TH["voting.orm_over_majority"],
                                   control="majority voting over the same samples", requires=[f"{arm}_orm"]),
               findings.seed_check(SEC, f"With {errors}, best-of-{top} with the PRM beats majority@{top}",
                                   f"acc(best-of-{top}, PRM) - acc(majority@{top}), {who}",
                                   [margin(r, arm, "prm", "majority") for r in rs], TH["voting.prm_over_majority"],
                                   control="majority voting over the same samples", requires=[f"{arm}_prm"])]
    return fs + search_claims(rs)


def search_claims(rs: list[dict]) -> list[dict]:
    """Snell et al.'s small-budget win of beam search over best-of-N on each thinker, where the readers vary, and
    DVTS against beam search."""
    small, large = searched_ns(rs)
    fs = [findings.seed_check(SEC, f"With {errors}, PRM-guided beam search beats best-of-{small} with the same PRM "
                              f"at N = {small}", f"acc(beam@{small}) - acc(best-of-{small}), PRM, {who}",
                              [beam_gain(r, arm, small) for r in rs], TH["search.beats"],
                              control=f"best-of-{small} with the PRM over the same thinker", requires=[f"{arm}_prm"])
          for arm, errors, who in THINKERS]
    return fs + [
        findings.seed_check(SEC, f"Beam search gains more over best-of-N when errors are drawn per reading than when "
                            f"they are fixed in the weights (N = {small}): a step re-read by a fresh reader can be "
                            f"right", f"beam gain over best-of-{small}: per-sample - fixed",
                            [beam_gain(r, "per_sample", small) - beam_gain(r, "fixed", small) for r in rs],
                            TH["voting.search_varies"], control="the fixed-error thinker",
                            requires=["per_sample_prm", "fixed_prm"]),
        findings.seed_check(SEC, f"With errors drawn per sample, DVTS is at least as good as beam search at N = {large}",
                            f"acc(DVTS@{large}) - acc(beam@{large}), PRM, per-sample thinker",
                            [r["per_sample"]["search"]["dvts"][large] - r["per_sample"]["search"]["beam"][large]
                             for r in rs], TH["search.non_inferior"], control="beam search at the same N",
                            requires=["per_sample_prm"])]


def searched_ns(rs: list[dict]) -> tuple[int, int]:
    """The smallest and the largest N the searches ran at (SEARCH_NS up to the samples per problem)."""
    Ns = sorted(rs[0]["per_sample"]["search"]["beam"])
    return Ns[0], Ns[-1]


def beam_gain(r: dict, arm: str, N: int) -> float:
    """acc(PRM-guided beam search at N) - acc(best-of-N with the PRM)."""
    return r[arm]["search"]["beam"][N] - r[arm]["bon"]["prm"][N]


COLOR = {"fixed": "#4C72B0", "per_sample": "#C44E52"}
METHODS = (("prm", "best-of-N, PRM (weakest step)", "#55A868", "-"),
           ("orm", "best-of-N, ORM (last step)", "#DD8452", "--"), ("majority", "majority@N", None, ":"))
"""(key, label, colour (None: the thinker's), line style) of the second figure's curves"""
SEARCHES = (("beam", "beam search, PRM", "s", "#2F6B3A", 0.9), ("dvts", "DVTS, PRM", "^", "#8172B3", 1.1))
"""(key, label, marker, colour, x nudge) of the searches, points beside the curves (bar: min..max over seeds)"""


def plot_majority(rs: list[dict], path: str) -> None:
    """Majority@N against N for both thinkers (band: min..max over seeds), greedy dotted."""
    fig, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
    for arm, label in (("fixed", "errors fixed in the weights (erring thinker)"),
                       ("per_sample", "errors drawn per sample")):
        Ns = sorted(rs[0][arm]["majority"])
        band(ax, Ns, [[r[arm]["majority"][N] for N in Ns] for r in rs], marker="o", ms=3, color=COLOR[arm],
             label=f"majority@N, {label}")
        ax.axhline(np.mean([r[arm]["greedy"] for r in rs]), color=COLOR[arm], ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N samples (forced S, temperature 1)")
    ax.set_ylabel("accuracy (all k)")
    ax.set_title("dotted: greedy")
    ax.legend(fontsize=8)
    save(fig, path)


def plot_bon(rs: list[dict], path: str) -> None:
    """One panel per thinker: best-of-N with the PRM and the ORM, and majority@N, against N (band: min..max over
    seeds), PRM-guided beam search and DVTS as points; greedy as a grey line."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True, layout="constrained")
    for ax, (arm, errors, who) in zip(axes, THINKERS):
        Ns = sorted(rs[0][arm]["majority"])
        for m, label, c, ls in METHODS:
            band(ax, Ns, [[(r[arm]["majority"] if m == "majority" else r[arm]["bon"][m])[N] for N in Ns] for r in rs],
                 alpha=0.12, marker="o", ms=3, ls=ls, color=c or COLOR[arm], label=label)
        for m, label, marker, c, nudge in SEARCHES:
            Ns = sorted(rs[0][arm]["search"][m])
            y = np.array([[r[arm]["search"][m][N] for N in Ns] for r in rs])
            ax.errorbar(np.array(Ns) * nudge, y.mean(0), yerr=[y.mean(0) - y.min(0), y.max(0) - y.mean(0)], color=c,
                        marker=marker, ms=6, ls="none", capsize=3, label=label)
        ax.axhline(np.mean([r[arm]["greedy"] for r in rs]), color="grey", lw=1, label="greedy")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N samples (forced S, temperature 1)")
        ax.set_title(f"{errors} ({who})", fontsize=10)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("accuracy (all k)")
    save(fig, path)


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    plot_majority(rs, os.path.join(out, "voting", "majority.png"))
    plot_bon(rs, os.path.join(out, "voting", "best_of_n.png"))
    fs = findings.gate(claims(rs))
    top = max(rs[0]["fixed"]["majority"])
    small, large = searched_ns(rs)
    header = ["thinker", "greedy", f"majority@{top}", "gain", "one sample (best-of-1)", f"best-of-{top}, ORM",
              f"best-of-{top}, PRM", f"best-of-{small}, PRM", f"beam@{small}", f"beam@{large}", f"DVTS@{large}"]
    rows = [[label, pm([r[arm]["greedy"] for r in rs]), pm([r[arm]["majority"][top] for r in rs]),
             pm([gain(r, arm) for r in rs]), pm([r[arm]["bon"]["prm"][1] for r in rs]),
             pm([r[arm]["bon"]["orm"][top] for r in rs]),
             pm([r[arm]["bon"]["prm"][top] for r in rs]), pm([r[arm]["bon"]["prm"][small] for r in rs]),
             *(pm([r[arm]["search"][m][N] for r in rs]) for m, N in (("beam", small), ("beam", large), ("dvts", large)))]
            for arm, label in (("fixed", "errors fixed (erring thinker)"), ("per_sample", "errors per sample"))]
    head = (f"majority@{top} - greedy: fixed errors {pm([gain(r, 'fixed') for r in rs])}, per-sample errors "
            f"{pm([gain(r, 'per_sample') for r in rs])}; best-of-{top} PRM - ORM: fixed "
            f"{pm([margin(r, 'fixed', 'prm', 'orm') for r in rs])}, per-sample "
            f"{pm([margin(r, 'per_sample', 'prm', 'orm') for r in rs])}")
    md = f"""## Self-consistency needs errors that vary

{opening("voting")}

![majority voting](voting/majority.png)

![best-of-N with verifiers and majority voting](voting/best_of_n.png)

{md_table(header, rows)}

Forced S chains on each seed's own test problems; the per-sample thinker's noise scale is
calibrated to the erring thinker's accuracy (σ = {pm([r['per_sample']['sigma'] for r in rs], '{:.3f}')}); mean ±
std over seeds. The per-sample thinker's vote converges by its design (a premise, checked); the primary claim is the
erring thinker's, against its own greedy decode (its placebo: the vote at temperature 0 over a second erring thinker,
an independent replicate of greedy).

Best-of-N keeps the sample its verifier scores highest, read as the search experiment reads it (an output that ends
without an answer scores 0): the ORM (trained on final-answer outcomes) by its last step, the answer, as Lightman
et al. read theirs; the PRM (trained on the rule's step labels up to the first wrong step, as PRM800K's) by its
weakest step. Each thinker's verifiers learn from its own samples of training problems; the per-sample thinker's
from samples that {VERIFIER_DRAWS} draws of their own wrote (many misreadings, as its test samples have), starting
from the base model. Where best-of-N with a verifier falls from one sample to {top} (its interval wholly below 0),
the verifier ranks one problem's answers worse than chance at the top of its scale: every claim that reads it is
untestable, naming it. The ORM's answer step must judge the whole chain at one token, which this model cannot do (on
digits a direct answer is at chance from k = 3), so among {top} samples a wrong answer it scores too high is picked more
often the more it is given to choose from (over-optimisation, Gao et al. 2022, arXiv 2210.10760). The PRM stopped
falling when its labels stopped at the first error: labelled past it, its answer step learned to doubt an answer that
follows from a wrong chain and with it the check that the answer follows from the chain, and a right chain closed by
a wrong answer won best-of-{top}.

Beam search and DVTS (search-and-learn's, M = {WIDTH}, methods.search) are guided by the PRM (weakest step so far).
On the per-sample thinker every generation call reads through a fresh direction: each candidate step of a search
re-reads the prompt and the chain so far through its own (methods.readers), as each best-of-N sample does, so a step
the PRM rejects is sampled again by a reader that may not misread. On the erring thinker every call misreads alike.
{" ".join(findings.verdict_line(f) for f in fs)}

{reading("voting")}
"""
    return [(md, head)]


def check(result) -> None:
    if any(arm not in result or "majority" not in result[arm] or "greedy" not in result[arm]
           for arm in ("fixed", "per_sample")):
        raise ValueError("a voting result needs fixed and per_sample, each with greedy and majority@N")
    if any(set(result[arm].get("bon", {})) != set(AGG) for arm in ("fixed", "per_sample")):
        raise ValueError("a voting result needs best-of-N with the ORM and the PRM (bon) for fixed and per_sample")
    if any(set(result[arm].get("search", {})) != {"beam", "dvts"} for arm in ("fixed", "per_sample")):
        raise ValueError("a voting result needs PRM-guided beam search and DVTS (search) for fixed and per_sample")


QUESTION = """Majority voting rescues a thinker whose samples err independently. What if its errors are fixed: the
same misreading in every sample? Does a vote over the erring thinker's samples still beat its greedy decode? And
does a verifier's pick, best-of-N with a process (PRM) or an outcome (ORM) reward model, beat the vote on either
thinker, and a search over steps with the PRM beat best-of-N?"""
PAPERS = """Wang et al. 2022, "Self-Consistency Improves Chain of Thought Reasoning in Language Models" (arXiv
2203.11171); Lightman et al. 2023, "Let's Verify Step by Step" (arXiv 2305.20050, Fig. 3); Snell et al. 2024 (arXiv
2408.03314); Hugging Face search-and-learn (beam search, DVTS)."""
EXPLORE = """`voting.reader(base, sigma, draw)`: one sample's misreading model; `voting.verifiers(thinker, seed, n_per_k,
steps, cache)`: a thinker's ORM and PRM; `methods.readers.Readers(base, sigma, task)`: the per-sample thinker."""

register(Experiment("voting", Config, run, claims, render, question=QUESTION, papers=PAPERS, explore=EXPLORE,
                    depends=on_erring(VerifierConfig, replicate=lambda cfg: cfg.temperature == 0), check=check,
                    streams=1, takes_checkpoint=False, room=room, placebo=placebo, negative="the vote at temperature 0 on the "
                    "same thinker (its greedy output): 0 by definition", render_cost=0.3, tier="lesson", run_cost=50,
                    quick=Config(n_test=5, samples=4, calib_draws=1, n_train=5, verifier_steps=10)))
