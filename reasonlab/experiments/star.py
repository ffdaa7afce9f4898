"""STaR where reasoning, not the format choice, must improve: one round of self-training on the erring thinker.

On the base model STaR's gain is a format switch (its forced S chains are already right: STaR only teaches it to
pick S). The erring thinker misreads its prompts' words (digits: the digits), so its forced S chains err
(train.sft.ERR_CFG), and here the chains
themselves must get better. One round: sample forced S chains from the thinker on train-part problems, keep what
passes a filter, fine-tune the thinker on the kept data alone (no fresh rows with the spec's chains: every right
step it learns it wrote itself), and read greedy forced S accuracy on this seed's own test problems. The arms share
the samples (one draw, kept by each filter), the recipe and the steps; each differs from STaR in one thing:

    star    STaR: the right answers with their chains (Zelikman et al. 2022, arXiv 2203.14465);
    direct  STaR's direct fine-tuning control: the same problems and right answers without their chains ("A x");
    none    the no-filter control: every complete chain, right or wrong (fine-tuning on its own samples alone);
    chain   RFT's step check: the right answers whose every chain state checks (Yuan et al. 2023, arXiv 2308.01825).

Each arm is scored greedily in the format it was fine-tuned on: the chains' arms in forced S, direct fine-tuning
(answers alone) in forced A; scoring direct on forced S would read it in a format it never trained on. The primary:
does one round of STaR raise the thinker's accuracy above direct fine-tuning on the same right answers (what
differs: the chains), and above the thinker before it (the trivial policy: not fine-tuning)? The page's headline is
STaR against the thinker before it. `methods.star` has the loop over rounds and its other knobs (rationalization,
pooling, the few-chains start), for exploration.
"""
from __future__ import annotations

import copy
import os
import random
from dataclasses import dataclass, replace
from typing import Callable, Literal

import numpy as np
import torch

from .. import tasks
from ..core.config import GEN_ROW, Count, NTest, Steps, fits
from ..core.evaluate import evaluate
from ..core.model import GPT
from ..core.problems import test_problems
from ..io.checkpoint import cache_key, fingerprint, weights_hash
from ..io.report import chance_level, k_label, md_table, plt, save
from ..methods import star as star_method
from ..methods.config import StarConfig
from ..stats import findings
from ..stats.findings import at_most, both, finding, seed_check
from ..stats.summary import pm
from ..tasks import Problem, Task
from ..train.sft import model_name
from ..train.zoo import get_model, on_erring, thinker_model
from . import Experiment, opening, reading, register, replicate_seed, task_of
from .thresholds import THRESHOLDS as TH

ARMS = ("star", "direct", "none", "chain")
SHOWN = {"star": "STaR: right answers with their chains", "direct": "direct: the same right answers, no chains",
         "none": "no filter: every complete chain", "chain": "chain filter: every step checked (RFT)"}
SEC = "star"
OWN = {"chains": "S", "direct": "A"}
"""the format an arm is scored in: the one it was fine-tuned on (its chains: forced S; answers alone: forced A)"""


@dataclass
class Config:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    problems: Count = 3000
    """training problems sampled, k uniform over the task's range (digits: 2..8), from the train part"""
    samples: Count = 4
    """forced S chains sampled per problem at temperature 1 (at most one kept per problem)"""
    steps: Steps = 100
    """fine-tuning steps of every arm (batch 64, warmup 30, cosine)"""
    n_test: NTest = 100
    """greedy test problems per k (this seed's own draw; digits' k = 2 has 25)"""
    treatment: Literal["chains", "direct"] = "chains"
    """what the STaR arm fine-tunes on: its kept chains (STaR), or the right answers without their chains (the
    direct control's procedure, run again on a draw of samples and a training seed of its own: the placebo)"""

    def validate(self) -> None:
        star_config(self, seed=0).validate()
        fits("problems", self.problems * self.samples, GEN_ROW, self.samples)


def star_config(cfg: Config, seed: int, f: str = "answer") -> StarConfig:
    """One round of STaR on forced S chains kept by filter f, the thinker fine-tuned on them alone."""
    return StarConfig(rounds=1, problems=cfg.problems, samples=cfg.samples, force="S", filter=f, fixed_frac=1.0,
                      steps=cfg.steps, seed=seed)


def cached_fine_tune(start: str, cache: str | None, progress: bool = False) -> Callable:
    """STaR's fine_tune through the model cache: round r's model is named by the start and by what decides it
    (recipe, kept data, init weights), so two arms that keep the same data train one model."""
    def fine_tune(r: int, recipe: dict, init: GPT) -> GPT:
        name = f"star-{start}-r{r}-{fingerprint(cache_key(recipe, init))}"
        return get_model(name, recipe, log=None, init=init, cache=cache, device=str(next(init.parameters()).device),
                         progress=progress)
    return fine_tune


_EVALS: dict = {}


def evaluation(model: GPT, probs: list[Problem], fmts: tuple[str, ...] = ("S", "A", "free")) -> dict:
    """Greedy accuracy of each of `fmts` (a forced format, or free), overall and per k, and the free format's shares.
    Memoized on the weights and problems in this process: arms that train one model evaluate it once."""
    key = (weights_hash(model), str(probs), fmts)
    if key not in _EVALS:
        out = {}
        for name in fmts:
            force = None if name == "free" else [name]
            r = evaluate(model, probs, force=force)
            out[name], out[name + "_by_k"] = r["acc"], {k: v["acc"] for k, v in r["per_k"].items()}
            if force is None:
                out["share"] = r["share"]
        _EVALS[key] = out
    return copy.deepcopy(_EVALS[key])


def star_rounds(model: GPT, start: str, sc: StarConfig, n_test: int, cache: str | None,
                progress: bool = False, task: str | Task = "digits") -> list[dict]:
    """STaR's loop (methods.star.train) on `task` from `model` (cached as `start`), the start and each round's model
    evaluated greedily on test problems (forced S, A, T and free): one record per round, round 0 the start. For
    exploring the loop's knobs (the notebook, benchmarks/star_round.py); the experiment runs its one round by hand,
    so that its arms share one draw of samples."""
    probs, fmts = test_problems(n_test, "star", sc.seed, task=task), ("S", "A", "T", "free")
    hist = [{"round": 0, **evaluation(model, probs, fmts)}]
    star_method.train(model, sc, cached_fine_tune(start, cache, progress),
                      callback=lambda rec, m: hist.append({**rec, **evaluation(m, probs, fmts)}), task=task)
    return hist


def arms_data(thinker: GPT, cfg: Config, seed: int) -> dict[str, dict]:
    """Every arm's kept data from one draw of samples: the answer, chain and no filter on the same samples, and the
    answer filter's kept set without its chains (direct)."""
    sc = star_config(cfg, seed)
    problems = star_method.problems_of_round(random.Random(sc.seed), sc.problems, cfg.task)
    gen = torch.Generator(device=next(thinker.parameters()).device).manual_seed(sc.seed)
    samples = star_method.sample(thinker, problems, sc, gen)
    data = {f: star_method.select(problems, samples, replace(sc, filter=f)) for f in ("answer", "none", "chain")}
    direct = {**data["answer"], "kept": star_method.without_chains(data["answer"]["kept"])}
    return {"star": data["answer"] if cfg.treatment == "chains" else direct, "direct": direct, "none": data["none"],
            "chain": data["chain"]}


def run(cfg: Config, seed: int, env) -> dict:
    spec = tasks.get(cfg.task).spec
    thinker = thinker_model("erring", seed, env.cache, env.device, task=cfg.task)
    probs = test_problems(cfg.n_test, "star", seed, task=cfg.task)
    fine_tune = cached_fine_tune(model_name("erring", seed, cfg.task), env.cache)
    sc, arms = star_config(cfg, seed), arms_data(thinker, cfg, seed)
    own = {arm: sc for arm in arms}
    if cfg.treatment == "direct":   # the placebo: the direct control again, on samples and training of its own
        own["star"] = star_config(cfg, replicate_seed(seed))
        arms["star"] = arms_data(thinker, cfg, own["star"].seed)["direct"]
    scored = {"star": OWN[cfg.treatment], "direct": OWN["direct"], "none": OWN["chains"], "chain": OWN["chains"]}
    out = {"start": {**evaluation(thinker, probs), "format": "S"}}
    for arm, data in arms.items():
        model = fine_tune(1, star_method.round_recipe(own[arm], 1, data["kept"], cfg.task), thinker)
        out[arm] = {**evaluation(model, probs), "format": scored[arm], "n_kept": data["n_kept"], "used": data["used"],
                    "false_positive_rate": data["false_positive_rate"]}
    return out if spec == "digits" else {**out, "task": spec}     # a digits result keeps the keys it always had


def own(r: dict, arm: str) -> float:
    """The arm's greedy accuracy in its own format (the one it was fine-tuned on; the start: forced S)."""
    return r[arm][r[arm].get("format", "S")]


def _diff(rs: list[dict], a: str, b: str) -> list[float]:
    return [own(r, a) - own(r, b) for r in rs]


def claims(rs: list[dict]) -> list[dict]:
    """Premises: the start leaves room below the ceiling; the answer filter admits wrong chains (so the chain filter
    keeps other data). Primary: STaR against direct fine-tuning on the same right answers, and against the trivial
    policy that would also pass that comparison, not fine-tuning at all. Secondaries: STaR against no filter; the
    chain filter against the answer filter."""
    room = findings.premise(seed_check(
        SEC, "The erring thinker leaves room for its chains to improve: forced S accuracy at most "
        f"{TH['star.start_room'].value:g} before STaR", "forced S accuracy of the erring thinker",
        [r["start"]["S"] for r in rs], TH["star.start_room"], test=at_most), "start_room")
    differ = findings.premise(seed_check(
        SEC, "The answer filter admits chains with a wrong step (so the chain filter keeps other data)",
        "share of sampled right answers with a wrong step", [r["star"]["false_positive_rate"] for r in rs],
        TH["star.filter_room"]), "filters_differ")
    vs_direct = seed_check(SEC, "", "", _diff(rs, "star", "direct"), TH["star.gain"])
    vs_start = seed_check(SEC, "", "", _diff(rs, "star", "start"), TH["star.gain"])
    prim = findings.primary(finding(
        SEC, "One round of STaR raises the thinker's accuracy above direct fine-tuning on the same right answers "
        "(what differs: the kept answers keep their chains), each arm scored in the format it was fine-tuned on "
        "(STaR: forced S; direct: forced A), and above the thinker before it (not fine-tuning at all, the trivial "
        "policy that would also beat direct fine-tuning)", "acc: STaR (forced S) - direct (forced A)",
        vs_direct["value"], vs_direct["ci95"], vs_direct["per_seed"], "> 0 (and STaR - the thinker before it, forced "
        "S, > 0)", both(vs_direct["verdict"], vs_start["verdict"]), p=max(vs_direct["p"], vs_start["p"]),
        source=TH["star.gain"].source, control="direct fine-tuning: the same problems and right answers without "
        "their chains, scored in forced A", requires=["start_room"],
        vs_start={"value": vs_start["value"], "ci95": vs_start["ci95"], "per_seed": vs_start["per_seed"]}))
    none = seed_check(SEC, "STaR beats fine-tuning on every complete chain it sampled, right or wrong",
                      "forced S acc: STaR - no filter", _diff(rs, "star", "none"), TH["star.gain"],
                      control="no filter", requires=["start_room"])
    chain = seed_check(SEC, "The chain filter beats the answer filter: chains whose errors cancel teach wrong steps",
                       "forced S acc: chain filter - STaR (answer filter)", _diff(rs, "chain", "star"),
                       TH["star.filter_gain"], control="the answer filter", requires=["start_room", "filters_differ"])
    return [room, differ, prim, none, chain]


def room(cfg: Config) -> tuple[float, float]:
    """A difference of two accuracies."""
    return (-1.0, 1.0)


def placebo(cfg: Config) -> Config:
    """The STaR arm replaced by the direct control, run a second time on its own samples and training seed (an
    independent replicate)."""
    return replace(cfg, treatment="direct")


def plot(rs: list[dict], path: str) -> str:
    """Forced S accuracy per k: the thinker before STaR and each arm after its round (mean over seeds)."""
    task = task_of(rs[0])
    fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
    ks = sorted(rs[0]["start"]["S_by_k"])
    for arm, c, ls in (("start", "#8C8C8C", ":"), ("star", "#4C72B0", "-"), ("direct", "#DD8452", "-"),
                       ("none", "#55A868", "--"), ("chain", "#C44E52", "--")):
        y = [np.mean([r[arm]["S_by_k"][k] for r in rs]) for k in ks]
        ax.plot(ks, y, marker="o", ms=3, ls=ls, color=c,
                label="the erring thinker (before)" if arm == "start" else SHOWN[arm])
    ax.axhline(chance_level(task), color="grey", ls=":", lw=1)
    ax.set_xlabel(k_label(task))
    ax.set_ylabel("greedy forced S accuracy")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7)
    return save(fig, path)


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    plot(rs, os.path.join(out, "star", "star.png"))
    top = task_of(rs[0]).k_max
    table = md_table(["model", "in its own format", "forced S", f"forced S, k = {top}", "forced A", "free", "kept"],
                     [[SHOWN.get(a, "the erring thinker (before)"),
                       f"{rs[0][a].get('format', 'S')}: {pm([own(r, a) for r in rs])}", pm([r[a]["S"] for r in rs]),
                       pm([r[a]["S_by_k"][top] for r in rs]), pm([r[a]["A"] for r in rs]),
                       pm([r[a]["free"] for r in rs]), pm([r[a]["n_kept"] for r in rs], "{:.0f}") if a != "start" else ""]
                      for a in ("start", *ARMS)])
    fs = findings.gate(claims(rs))
    head = (f"STaR over the thinker before it: {pm(_diff(rs, 'star', 'start'))} forced S in one round "
            f"({pm([r['start']['S'] for r in rs])} → {pm([r['star']['S'] for r in rs])}; direct fine-tuning, forced "
            f"A: {pm([r['direct']['A'] for r in rs])})")
    md = f"""## STaR where reasoning must improve: the erring thinker

{opening("star")}

![forced S accuracy per k](star/star.png)

{table}

One round: {rs[0]['star']['n_kept']} of the sampled forced S chains kept by STaR (seed 0), the erring thinker
fine-tuned on each arm's data alone, greedy accuracy on this seed's test problems; mean ± std over seeds. Sampled
right answers with a wrong step (what the answer filter admits and the chain filter drops):
{pm([r['star']['false_positive_rate'] for r in rs], '{:.3f}')}. {" ".join(findings.verdict_line(f) for f in fs)}

{reading("star")}
"""
    return [(md, head)]


def check(result) -> None:
    if any(a not in result or "S" not in result[a] for a in ("start", *ARMS)):
        raise ValueError("a star result needs the start's and every arm's forced S accuracy")


QUESTION = """A thinker whose chains err (it misreads its prompts) samples its own chains and is fine-tuned on those
with the right answer. Do its chains get better than fine-tuning on the same right answers without the chains would
make them, and does checking every step matter?"""
PAPERS = """STaR (Zelikman et al. 2022, arXiv 2203.14465); RFT (Yuan et al. 2023, arXiv 2308.01825)."""
EXPLORE = """`reasonlab star --steps 300`; `methods.star.train` runs STaR's loop over rounds (rationalization,
pooling, the few-chains start)."""

register(Experiment("star", Config, run, claims, render, question=QUESTION, papers=PAPERS, explore=EXPLORE,
                    depends=on_erring(StarConfig), check=check,
                    keys=("start", *ARMS), takes_checkpoint=False, room=room, placebo=placebo,
                    quick=Config(problems=40, samples=1, steps=2, n_test=2), run_cost=25, render_cost=0.3))
