"""RL from a rule reward: the group baseline alone (REINFORCE with and without it), GRPO against REINFORCE with the
same baseline, and Dr. GRPO's length bias.

The primary question is whether subtracting the group's mean reward, and nothing else, makes REINFORCE reach greedy
accuracy 0.99 sooner: `reinforce_baseline` and `reinforce` differ in the RLConfig field `advantage` alone (the same
loss -A log pi, one update per batch, no clip, no KL, the same seed). Accuracy is probed every step on a probe set
drawn per seed from the val part, so steps to solve are not rounded to a probe grid; the final evaluation is on the
seed's own test draw.
"""
from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass, replace

import numpy as np

from ..core.config import Count, Every, NonNegative, NTest, Positive, Steps, Temperature
from ..core.evaluate import evaluate
from ..core.model import GPT
from ..core.problems import as_task, problems_per_k, test_problems
from ..io.report import chance_level, k_label, md_table, plot_format_share, plot_rl_runs
from ..stats import findings
from ..stats.findings import missing, seed_check
from ..stats.summary import pm
from ..tasks import FMT_NAMES, Problem, Task
from ..train.rl import ALGOS, Algo, RLConfig, every_n_steps, train
from . import Experiment, opening, reading, register, replicate_seed, task_of
from .thresholds import THRESHOLDS as TH

OVERRIDES = ("learning_rate", "beta", "epsilon", "num_iterations", "prompts_per_step", "num_generations",
             "temperature")
"""The RL settings a run may set for every algorithm at once (None: each algorithm's preset)."""
SECTION = "rl"
REPLICATE = "replicate"
"""the placebo's treatment run: the control's algorithm on training and sampling streams of its own"""


@dataclass
class Config:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    steps: Steps = 60
    """RL steps per run (censoring: a run that never reaches 0.99 counts this many steps)"""
    algos: tuple[Algo, ...] = ("grpo", "reinforce", "reinforce_baseline", "dr_grpo")
    """RL algorithms trained (a claim whose arms are not among them is reported missing)"""
    treatment: Algo = "reinforce_baseline"
    """the primary's treatment arm: REINFORCE with the group mean subtracted"""
    control: Algo = "reinforce"
    """the primary's control arm: REINFORCE without a baseline (the placebo sets the treatment to it: then a second
    run of it on streams of its own is the treatment)"""
    eval_every: Every = 1
    """greedy probe every N RL steps until the run first reaches 0.99 (1: steps to solve are exact)"""
    n_probe: Count = 100
    """probe problems per k, drawn per seed from the val part"""
    n_test: NTest = 500
    """greedy test problems per k for the final evaluation (the seed's own test draw)"""
    learning_rate: Positive | None = None
    """Adam learning rate of every algorithm; None: the preset's"""
    beta: NonNegative | None = None
    """KL weight to the base model of every algorithm; None: the preset's"""
    epsilon: Positive | None = None
    """the ratio's clip of every clipped algorithm; None: the preset's"""
    num_iterations: Count | None = None
    """updates on each batch of samples; None: the preset's"""
    prompts_per_step: Count | None = None
    """problems per RL step; None: the preset's"""
    num_generations: Count | None = None
    """samples per problem (the group); None: the preset's"""
    temperature: Temperature | None = None
    """sampling temperature of the rollouts; None: the preset's"""

    def overrides(self) -> dict:
        """The RLConfig fields set for every algorithm (those not None)."""
        return {k: getattr(self, k) for k in OVERRIDES if getattr(self, k) is not None}

    def validate(self) -> None:
        if not self.algos:
            raise ValueError(f"rl: algos must be among {', '.join(ALGOS)}, at least one")
        if not 1 <= self.eval_every <= self.steps:
            raise ValueError(f"rl: eval_every must be in 1..steps ({self.steps}), got {self.eval_every}")
        for a in self.algos:                  # every algorithm's preset must take the overrides
            try:
                RLConfig.preset(a, steps=self.steps, task=self.task, **self.overrides())
            except ValueError as e:
                raise ValueError(f"rl: {a}: {e}") from None


def run(cfg: Config, seed: int, env) -> dict:
    model = env.base(seed, cfg.task)
    start = base_eval(model, cfg.n_test, seed, cfg.task)
    out = {}
    for a in dict.fromkeys(cfg.algos):
        out[a] = rl_run(model, a, seed, cfg.steps, cfg.eval_every, cfg.n_test, cfg.n_probe, progress=True, start=start,
                        overrides=cfg.overrides(), task=cfg.task)
        roles = [role for role, algo in (("treatment", cfg.treatment), ("control", cfg.control)) if algo == a]
        if roles:                             # the primary's arms
            out[a]["roles"] = roles
    if cfg.treatment == cfg.control:          # the placebo: the control's algorithm once more, on streams of its own
        out[cfg.control]["roles"] = ["control"]
        out[REPLICATE] = {**rl_run(model, cfg.control, seed, cfg.steps, cfg.eval_every, cfg.n_test, cfg.n_probe,
                                   progress=True, start=start, overrides=cfg.overrides(), task=cfg.task,
                                   stream=replicate_seed(seed)), "roles": ["treatment"]}
    return out


def probe_set(n: int, seed: int, task: str | Task = "digits") -> list[Problem]:
    """The seed's probe problems for time-to-solve: n per k from the val part (never trained on, never scored)."""
    return problems_per_k(n, seed=f"rl-probe-{seed}", split="val", task=task)


def rl_run(base: GPT, algo: str, seed: int, steps: int, every: int, n_test: int = 500, n_probe: int = 100,
           progress: bool = False, start: dict | None = None, overrides: dict | None = None,
           task: str | Task = "digits", stream: int | None = None) -> dict:
    """One RL run on `task` from `base` with the spec's defaults for `algo` (RLConfig fields in `overrides` replace
    them): greedy accuracy on the seed's probe set every `every` steps until the first probe at >= 0.99 (time to
    solve; seconds count training only), then a final evaluation on the seed's test draw. start: base_eval(base,
    n_test, seed, task), when the caller has it (the same for every algorithm). The overrides are kept in the result
    (only when there are some), and so is the task (only when it is not digits). stream: the seed of the training
    problems and samples (None: `seed`; the probe and test problems are always the seed's)."""
    spec = as_task(task).spec
    policy = copy.deepcopy(base)
    cfg = RLConfig.preset(algo, **{**dict(steps=steps, seed=seed if stream is None else stream, log_every=0,
                                          task=spec), **(overrides or {})})
    probe = probe_set(n_probe, seed, spec)
    state = {"eval_s": 0.0, "solved": None, "curve": []}
    t0 = time.perf_counter()

    def check(rec, model):
        step = rec["step"]
        if state["solved"] is not None:
            return
        t = time.perf_counter()
        r = evaluate(model, probe)
        state["curve"].append({"step": step, "acc": r["acc"], "length": r["length"], "share": r["share"]})
        if r["acc"] >= 0.99:
            state["solved"] = {"step": step, "seconds": round(t - t0 - state["eval_s"], 1)}
        state["eval_s"] += time.perf_counter() - t

    # the reference is always passed so KL is logged; with beta = 0 (REINFORCE) it does not enter the loss
    hist = train(policy, copy.deepcopy(base), cfg, callback=every_n_steps(every, check), log=None, progress=progress)
    train_s = time.perf_counter() - t0 - state["eval_s"]
    final, start = evaluate(policy, test_problems(n_test, "rl", seed, task=spec)), start or base_eval(base, n_test, seed,
                                                                                                     spec)
    tail = [h for h in hist if not h.get("skipped")][-10:]   # DAPO may skip steps: they have no metrics
    sampled = {key: float(np.mean([h[key] for h in tail])) for key in ("acc", "length", "kl_exact", "entropy")}
    sampled["direct"] = float(np.mean([h["share"]["direct"] for h in tail]))
    return {"algo": algo, "seed": seed, "steps": steps, "eval_every": every, "train_s": round(train_s, 1), "solved": state["solved"],
            "sampled_last10": sampled, "base_acc": start["acc"], "acc": final["acc"], "share": final["share"],
            "length": final["length"], "acc_by_k": {k: v["acc"] for k, v in final["per_k"].items()},
            "share_by_k": {k: v["share"] for k, v in final["per_k"].items()}, "curve": state["curve"], "hist": hist,
            **({"overrides": overrides} if overrides else {}), **({} if spec == "digits" else {"task": spec})}


def base_eval(base: GPT, n_test: int, seed: int, task: str | Task = "digits") -> dict:
    """Greedy free generation of the base model on the seed's test draw: where every RL run starts."""
    return evaluate(base, test_problems(n_test, "rl", seed, task=task))


def steps_to_solve(run: dict) -> float:
    """First probe step at greedy accuracy >= 0.99; a run that never got there counts its full length (censored:
    this understates the slower side's time, so a difference it supports is conservative)."""
    return run["solved"]["step"] if run["solved"] else run["steps"]


def iterations(run: dict) -> int:
    """A stored run's updates on each batch, from its algorithm's preset and its overrides: GRPO makes two,
    REINFORCE one."""
    return RLConfig.preset(run["algo"], **run.get("overrides", {})).num_iterations


def updates_to_solve(run: dict) -> float:
    """Optimizer updates to greedy accuracy 0.99 (steps x the algorithm's updates per step)."""
    return steps_to_solve(run) * iterations(run)


def room(cfg: Config) -> tuple[float, float]:
    """The primary's range by the design: steps to solve lie in [eval_every, steps] (the first probe is at step
    eval_every; an unsolved run counts steps), so their difference lies within +-(steps - eval_every)."""
    return float(cfg.eval_every - cfg.steps), float(cfg.steps - cfg.eval_every)


def placebo(cfg: Config) -> Config:
    """The primary's treatment arm replaced by its control arm: run() runs the control's algorithm a second time on
    streams of its own (an independent replicate), nothing to find."""
    return replace(cfg, treatment=cfg.control)


def rl_faster(rl: list[dict], fast: str, slow: str, claim: str, **detail) -> dict:
    """A claim that `fast` reaches greedy accuracy 0.99 in fewer optimizer updates than `slow` (steps when both make
    one update per batch), one difference per seed."""
    if fast not in rl[0] or slow not in rl[0]:   # the threshold still stated: the lab reads it against the room
        return {**missing(SECTION, claim, f"needs {fast} and {slow} in the RL experiment", **detail),
                "threshold": f"> {TH['rl.faster'].value:g}"}
    diff = [updates_to_solve(r[slow]) - updates_to_solve(r[fast]) for r in rl]
    ones = all(iterations(rl[0][a]) == 1 for a in (fast, slow))
    unit = "steps" if ones else "updates"
    return seed_check(SECTION, claim, f"{unit} to 0.99: {slow} - {fast} (unsolved: the run's length)", diff,
                      TH["rl.faster"], control=slow, **detail)


def baseline_alone(rs: list[dict]) -> dict:
    """The primary: the run marked as the treatment against the run marked as the control (`roles`; by default
    REINFORCE with and without the group mean subtracted, which differ in that alone); steps to 0.99, probed every
    step."""
    arms = {"treatment": "reinforce_baseline", "control": "reinforce"}
    arms.update({role: a for a, run in rs[0].items() for role in run.get("roles", ())})
    t, c = arms["treatment"], arms["control"]
    claim = (f"The group baseline alone speeds REINFORCE up: {t} reaches greedy accuracy 0.99 in fewer steps than {c} "
             "(they differ only in the advantage, r - the group's mean against r: the same loss -A log pi, one update "
             "per batch, no clip, no KL, the same seed)")
    return findings.primary(rl_faster(rs, t, c, claim))


def grpo_vs_baseline(rs: list[dict]) -> dict:
    """GRPO against REINFORCE with the same group baseline, in optimizer updates (GRPO's second update per batch
    counts)."""
    return rl_faster(rs, "grpo", "reinforce_baseline", "GRPO reaches 0.99 in fewer optimizer updates than REINFORCE "
                     "with the same group baseline (they differ in three things: GRPO divides the advantage by the "
                     "group's std, makes two clipped-ratio updates per batch (counted as two) and adds a KL penalty, "
                     "beta 0.04 with k3)")


def claims(rs: list[dict]) -> list[dict]:
    return [baseline_alone(rs), grpo_vs_baseline(rs), length_bias(rs)]


def length_bias(rs: list[dict]) -> dict:
    """Dr. GRPO's length bias through the format choice: GRPO divides each completion's loss by its own length, so
    a long wrong output (a T chain, on digits up to 12 tokens) is pushed down less per token than a short wrong one
    (A, 3 tokens on digits); Dr. GRPO divides by a constant (and, as its paper does, does not scale the advantage by
    the group's std). Same seed, same first samples: the sampled length over the last 10 steps."""
    claim = ("GRPO drifts toward longer outputs than Dr. GRPO (the two differ in the per-sequence mean, which favours "
             "long wrong outputs, and in the advantage's std scaling)")
    if "grpo" not in rs[0] or "dr_grpo" not in rs[0]:
        return missing(SECTION, claim, "needs grpo and dr_grpo in the RL experiment")
    diff = [r["grpo"]["sampled_last10"]["length"] - r["dr_grpo"]["sampled_last10"]["length"] for r in rs]
    return seed_check(SECTION, claim, "sampled output length, last 10 steps: grpo - dr_grpo", diff,
                      TH["rl.length_bias"], control="dr_grpo")


def rl_table(runs: list[dict]) -> str:
    """GRPO / REINFORCE / ... results: one row per algorithm, mean ± std over the seeds in `runs`."""
    rows = []
    for algo in dict.fromkeys(r["algo"] for r in runs):
        rs = [r for r in runs if r["algo"] == algo]
        solved = [r for r in rs if r["solved"]]
        steps = pm([r["solved"]["step"] for r in solved], "{:.0f}") if solved else "—"
        secs = pm([r["solved"]["seconds"] for r in solved], "{:.1f}") if solved else "—"
        share = " / ".join(pm([r["share"][f] for r in rs], "{:.2f}") for f in FMT_NAMES)
        rows.append([algo, pm([r["acc"] for r in rs]), pm([min(r["acc_by_k"].values()) for r in rs]), share,
                     pm([r["length"] for r in rs], "{:.2f}"), f"{len(solved)}/{len(rs)}", steps, secs,
                     pm([r["sampled_last10"]["acc"] for r in rs]), pm([r["sampled_last10"]["direct"] for r in rs], "{:.2f}"),
                     pm([r["sampled_last10"]["kl_exact"] for r in rs], "{:.3f}")])
    base = [r["base_acc"] for r in runs if r["algo"] == runs[0]["algo"]]
    task = task_of(runs[0])
    table = md_table(["algo", f"greedy acc (k = {task.k_min}..{task.k_max})", "min over k", "greedy share A / S / T",
                      "greedy length", "solved (acc ≥ 0.99)", "steps to solve", "seconds to solve",
                      "sampled acc, last 10 steps", "sampled share A", "KL to base (exact)"], rows)
    return (f"{table}\n\nBase model (free, greedy): accuracy {pm(base)}. Chance: {chance_level(task):.2g}. Mean ± std "
            f"over seeds {sorted({r['seed'] for r in runs})}.")


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    algos = [a for a in ALGOS if a in rs[0]]
    runs = [r[a] for a in algos for r in rs]
    task = task_of(runs[0])
    plot_rl_runs({a: [r[a]["hist"] for r in rs] for a in algos}, os.path.join(out, "rl", "curves.png"),
                 "RL from the base model (mean over seeds; band = min..max)", chance=chance_level(task))
    plot_format_share(rs[0][algos[0]]["hist"], os.path.join(out, "rl", f"formats_{algos[0]}.png"),
                      f"{algos[0]}, first seed", xlabel=k_label(task))

    def solved(a):
        st = [r[a]["solved"]["step"] for r in rs if r[a]["solved"]]
        steps = rs[0][a]["steps"]
        return (f"{a} reaches 0.99 in {pm(st, '{:.0f}')} steps ({len(st)}/{len(rs)} seeds)" if st
                else f"{a} not at 0.99 within {steps} steps")
    head = "; ".join(solved(a) for a in algos)
    over = runs[0].get("overrides", {})
    note = ("Every algorithm ran with " + ", ".join(f"{k} {v:g}" for k, v in over.items())
            + " in place of its preset's. ") if over else ""
    fs = claims(rs)
    n = rs[0][algos[0]].get("eval_every", 1)
    every = "after every step" if n == 1 else f"every {n} steps"
    md = f"""## RL from a rule reward: the group baseline, GRPO and REINFORCE

{opening("rl")}

![RL curves](rl/curves.png)

![format share](rl/formats_{algos[0]}.png)

{rl_table(runs)}

16 problems × 8 samples per step, each algorithm with its preset (GRPO: lr 3e-5, β 0.04 with k3, clip 0.2, two
updates per batch; the REINFORCE presets: one update, no clip, no KL); every run of a seed starts from the same base
model with the same sampling seed. Time to solve is the first step whose greedy probe ({every}, on the seed's probe set
from the val part) is at ≥ 0.99; the table's accuracy is on the seed's own test draw. The primary pits `reinforce_baseline` against
`reinforce`, which differ only in the advantage (the group's mean subtracted or not); GRPO differs from
`reinforce_baseline` in its std scaling, two clipped updates per batch and the KL, so that comparison is secondary and
counts GRPO's updates. {note}{" ".join(findings.verdict_line(f) for f in fs)}

{reading("rl")}
"""
    return [(md, head)]


def check(result: dict) -> None:
    """Every algorithm's run has its history and its time to solve."""
    if not result or not all(isinstance(r, dict) and "hist" in r and "solved" in r for r in result.values()):
        raise ValueError("a rl result maps each algorithm to its run (hist, solved, ...)")


QUESTION = """Reward only the right answer (plus a format bonus). Does RL move the model from answering directly to
thinking, and does the baseline matter: REINFORCE with and without GRPO's group mean, all else equal?"""
PAPERS = """GRPO (Shao et al. 2024, arXiv 2402.03300); DeepSeek-R1 (2025, arXiv 2501.12948); Dr. GRPO (Liu et al.
2025, arXiv 2503.20783); REINFORCE (Williams 1992)."""
EXPLORE = """`reasonlab rl --algos grpo dapo rloo gspo`, `--beta 0`, `--learning-rate 1e-4`; one run with every
setting: `reasonlab train --algo dapo --kl-estimator exact`."""

register(Experiment("rl", Config, run, claims, render, question=QUESTION, papers=PAPERS, explore=EXPLORE,
                    check=check,
                    quick=Config(steps=4, n_test=40, n_probe=20), run_cost=17, render_cost=0.7, room=room,
                    placebo=placebo))
