"""Thinking on a budget: L1-Exact and L1-Max trained by GRPO (methods.budget), with and without a supervised warm
start, against s1 forcing and the budget-blind fixed formats, at equal tokens.

The primary asks whether L1's budget term teaches RL from the base model to read its budget: the first variant
against the same RL whose reward ignores the budget (alpha = 0: correctness alone; same seed, same problems and
budgets drawn, so the two arms differ only in the reward's budget term). Whether reading the budget pays at all
with the formats the base model can write is a premise (`budget.best_policies`), one per reward.

Each trained budget model is also saved in the model cache (`model_name`), for `reasonlab sample --budget B
--checkpoint <cache>/l1-exact-seed0` and `scripts/eval_budget_models.py`.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from typing import Literal, get_args

from .. import tasks
from ..core.config import Count, NTest, Steps, Steps0, check_numbers
from ..core.problems import as_task, test_problems
from ..io.report import chance_level
from ..methods import budget
from ..methods.config import L1Fields
from ..stats import findings
from ..tasks import Task
from ..train.zoo import store
from . import Experiment, opening, register, replicate_seed, task_of
from .l1_report import (
    arms,
    blind,
    budgets_of,
    cells_where,
    control_name,
    equal_token_gain,
    headline,
    ks_of,
    mean_cells,
    mean_std,
    method_note,
    methods_of,
    pays,
    plot_accuracy,
    plot_adherence,
    plot_strides,
    reward_of,
    s1_metrics,
    spread,
    start_of,
    stride_examples,
    stride_labels,
    table_accuracy,
    table_adherence,
    table_fixed,
    table_per_k,
    table_s1,
    table_strides,
    table_training_log,
    table_within,
    trained,
    variants_of,
)
from .thresholds import THRESHOLDS as TH

Variant = Literal["exact", "max", "exact+sft", "max+sft"]
VARIANTS = get_args(Variant)



def max_steps(task: str | Task) -> int:
    """The most chain steps an output of the task can hold (its format token, then a state in every other slot;
    digits: 13): steps written are in 0..max_steps whatever the model does, so a spread (steps at the largest budget
    minus at b = 0) is within ±max_steps."""
    return as_task(task).max_out - 1


@dataclass
class Config(L1Fields):
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    variants: tuple[Variant, ...] = ("exact",)
    """budget models trained: L1-Exact or L1-Max, each optionally (+sft) after an SFT warm start on budget-annotated
    chains. The first is the primary's treatment; its control, always trained, is the same variant with alpha = 0"""
    steps: Steps = 100
    """GRPO steps per budget model"""
    sft_steps: Steps0 = 300
    """warm-start steps of the +sft budget models"""
    n_test: NTest = 100
    """greedy test problems per k (each evaluated at every budget), drawn per seed"""
    log_every: Count | None = None
    """per-budget training log: one record per this many GRPO steps (None: steps // 5, at least 1)"""
    n_examples: Count = 3
    """example outputs kept per (variant, stride class) for b < ceil(k/2)"""

    def validate(self) -> None:
        if not self.variants:
            raise ValueError("l1: at least one variant")
        check_training(self, "l1")

    @property
    def every(self) -> int:
        """The training log's interval, log_every resolved."""
        return self.log_every if self.log_every is not None else max(1, self.steps // 5)


def check_training(cfg, what: str) -> None:
    """The GRPO and warm-start settings that l1 and l1_recipe share (alpha = 0: a reward blind to the budget): the
    bounds their types carry, and a group of at least two samples."""
    check_numbers(cfg, what)
    if cfg.num_generations < 2:
        raise ValueError(f"{what}: num_generations must be >= 2 (GRPO needs a group), got {cfg.num_generations}")


def placebo(cfg: Config) -> Config:
    """The treatment arm replaced by the control arm: every variant trained with alpha = 0, as its control is, on
    draws of its own (an independent replicate)."""
    return replace(cfg, alpha=0.0)


def room(cfg: Config) -> tuple[float, float]:
    """The primary's statistic by the design: each arm's spread is within ±max_steps, their difference twice that."""
    most = max_steps(cfg.task)
    return (-2.0 * most, 2.0 * most)


def model_name(variant: str, seed: int, quick: bool = False) -> str:
    """The model cache's name for a trained budget model: l1-<variant>-seed<s> ("+" as "-"; l1-quick-... in quick
    mode; the control arm is the variant "<first>+alpha0"). The last run of a variant and seed wins; its JSON holds
    the config it was trained with."""
    return f"l1-{'quick-' if quick else ''}{variant.replace('+', '-')}-seed{seed}"


def stored_config(cfg: Config) -> dict:
    """The config as a result records it: every field, the training log's interval resolved; the task as its spec,
    left out for digits (a digits result keeps the keys it always had)."""
    out = {**asdict(cfg), "log_every": cfg.every}
    spec = tasks.get(cfg.task).spec
    return {k: v for k, v in out.items() if k != "task"} if spec == "digits" else {**out, "task": spec}



def train_arm(cfg: Config, variant: str, alpha: float, base, seed: int, probs, env, name: str,
              stream: int | None = None) -> dict:
    """One budget model trained with the reward weight `alpha`, saved in the model cache as `name`, evaluated at
    every budget on the test problems. stream: the seed of its training draws (None: `seed`)."""
    tr = budget.train_variant(base, variant, seed if stream is None else stream, steps=cfg.steps,
                              **{**cfg.l1_fields(), "alpha": alpha}, sft_steps=cfg.sft_steps, log_every=cfg.every,
                              progress=True, task=cfg.task)
    store(name, {"experiment": "l1", "variant": variant, "seed": seed, **stored_config(cfg), "alpha": alpha,
                 **({} if stream is None else {"stream": stream})}, tr["model"], cache=env.cache)
    return {"variant": variant, "alpha": alpha, "train_seconds": round(tr["seconds"], 1),
            "sft_seconds": round(tr["sft_seconds"], 1), "sft_loss": tr["sft_loss"], "logs": tr["logs"],
            "reward": tr["reward"], "eval": budget.eval_budget_model(tr["model"], probs, cfg.n_examples)}


def run(cfg: Config, seed: int, env) -> dict:
    """Train every variant from the seed's base model, and the first again with alpha = 0 (the control: same seed,
    same draws); save each in the model cache and evaluate it at every budget on the seed's own test problems; then
    s1 forcing, the fixed formats and the base model's free choice on the same problems. Under the placebo (alpha
    = 0 for every variant) the variants train on draws of their own (`replicate_seed`): the first is then an
    independent replicate of the control."""
    base = env.base(seed, cfg.task).eval()
    probs = test_problems(cfg.n_test, "l1", seed, task=cfg.task)
    res: dict = {"seed": seed, "config": stored_config(cfg), "variants": {}}
    stream = replicate_seed(seed) if cfg.alpha == 0 else None
    for v in cfg.variants:
        res["variants"][v] = train_arm(cfg, v, cfg.alpha, base, seed, probs, env, model_name(v, seed, env.quick),
                                       stream)
    first = cfg.variants[0]
    res["control"] = train_arm(cfg, first, 0.0, base, seed, probs, env, model_name(f"{first}+alpha0", seed, env.quick))
    res.update(budget.eval_baselines(base, probs))
    return res


PAYS = {"exact": "reading pays under L1-Exact", "max": "reading pays under L1-Max"}
"""the premises' names: whether reading the budget pays under each reward, which the claims on the variants trained
with that reward require"""


def premises(results: list[dict], kinds: list[str]) -> list[dict]:
    """Per reward trained with: reading the budget pays at least the design bound with the base model's formats."""
    top = budgets_of(results[0])[-1]
    return [findings.premise(findings.seed_check(
        "l1", f"reading the budget pays under L1-{kind.capitalize()}: with the base model's formats (A, S, T), the "
        f"best budget-aware policy earns at least {TH['l1.aware_gap'].value:g} more L1-{kind.capitalize()} reward "
        f"than the best budget-blind one (b = 0..{top})", f"aware - blind, expected L1-{kind.capitalize()} reward",
        [pays(r, kind) for r in results], TH["l1.aware_gap"]), PAYS[kind]) for kind in kinds]


def claims(results: list[dict]) -> list[dict]:
    """The premises (reading the budget pays, per reward trained with), the primary (the first variant reads its
    budget more than the same RL with alpha = 0), then per variant: it reads its budget, keeps it (Max), scales,
    and beats s1 forcing and the budget-blind fixed formats at equal tokens (a model that ignores the budget and
    writes S chains would pass a comparison with a truncated T chain alone); and whether RL needs a warm start."""
    ms = [methods_of(r) for r in results]
    vs = variants_of(results[0])
    ks = [ks_of(r) for r in results]
    allc = [cells_where(r, None) for r in results]
    first, ctl = f"L1-{vs[0]}", control_name(results[0])
    top = budgets_of(results[0])[-1]
    treat = [spread(m[first], k) for m, k in zip(ms, ks)]
    base = [spread(m[ctl], k) for m, k in zip(ms, ks)]
    out = premises(results, [kind for kind in ("exact", "max") if kind in map(reward_of, vs)])
    out.append(findings.primary(findings.seed_check(
        "l1", f"{first} {start_of(vs[0])} reads its budget more than the same RL whose reward ignores it ({ctl}: "
        "correctness alone; same seed and draws, the arms differ only in the reward's budget term): its spread "
        f"(chain steps at b = {top} minus at b = 0) is more than one step larger",
        "spread(treatment) - spread(control), steps, mean over k", [t - c for t, c in zip(treat, base)],
        TH["l1.reads_over_blind"], control=ctl, requires=[PAYS[reward_of(vs[0])]],
        spread_treatment=[round(x, 4) for x in treat], spread_control=[round(x, 4) for x in base])))
    for v in vs:
        name, req = f"L1-{v}", [PAYS[reward_of(v)]]
        out.append(findings.seed_check("l1", f"{name} reads its budget: it writes more than one chain step more at "
                                       f"b = {top} than at b = 0", f"steps(b = {top}) - steps(b = 0), mean over k",
                                       [spread(m[name], k) for m, k in zip(ms, ks)], TH["l1.reads"], requires=req))
        if reward_of(v) == "max":
            out.append(findings.seed_check("l1", f"{name} keeps the budget (s1's Control): share of outputs with "
                                           "steps <= b", "share within budget, all (b, k)",
                                           [mean_cells(m[name], "within", c) for m, c in zip(ms, allc)],
                                           TH["l1.control"], requires=req))
        scal = [s1_metrics(m[name], k)["scaling"] for m, k in zip(ms, ks)]
        out.append(findings.seed_check("l1", f"{name} scales (s1's Scaling): accuracy rises with compute across "
                                       "budgets", "mean pairwise slope of accuracy against tokens (0 on a seed whose "
                                       "compute does not vary: accuracy does not rise with it)",
                                       [x if x is not None else 0.0 for x in scal], TH["l1.scaling"], requires=req))
        gains = {c: [equal_token_gain(m[name], ref(m, r), cc) for m, r, cc in zip(ms, results, allc)]
                 for c, ref in (("s1 forcing (T cut at b)", lambda m, r: m["s1 forcing (T cut at b)"]),
                                ("s1 forcing (S cut at b)", lambda m, r: m["s1 forcing (S cut at b)"]),
                                ("fixed formats", blind))}
        out.append(findings.seed_check("l1", f"at equal tokens, {name} is more accurate than s1 forcing (T and S "
                                       "chains) and than the budget-blind fixed formats", "smallest of the three "
                                       "equal-token accuracy gains, all (b, k)", [min(g) for g in zip(*gains.values())],
                                       TH["l1.equal_tokens"], control="fixed formats", requires=req,
                                       **{c: [round(x, 4) for x in g] for c, g in gains.items()}))
    for v in vs:
        if v.endswith("+sft") and v[:-4] in vs:
            cold, warm = f"L1-{v[:-4]}", f"L1-{v}"
            out.append(findings.seed_check("l1", f"no SFT warm start needed: {cold} (RL from the base) reads its "
                                           f"budget within one step as well as {warm}", f"spread({cold}) - "
                                           f"spread({warm})", [spread(m[cold], k) - spread(m[warm], k)
                                                               for m, k in zip(ms, ks)],
                                           TH["l1.no_sft"], requires=[PAYS[reward_of(v)]]))
    return out


def config_of(r: dict) -> Config:
    """The Config a result was run with, read back from what it stored."""
    c = {f: r["config"][f] for f in Config.__dataclass_fields__ if f in r["config"]}
    return Config(**{**c, "variants": tuple(c["variants"])})


def checked(results: list[dict]) -> list[dict]:
    """The claims as the lab judges them: the primary against the design's room, every claim gated by the premises
    it requires (the section shows the verdicts the lab's report does)."""
    return findings.judge(claims(results), room(config_of(results[0])))


def render(results: list[dict], out: str) -> list[tuple[str, str]]:
    """The report's section and its headline; plots go to <out>/l1/."""
    d = os.path.join(out, "l1")
    os.makedirs(d, exist_ok=True)
    plot_accuracy(results, os.path.join(d, "accuracy_vs_budget.png"))
    plot_strides(results, os.path.join(d, "strides.png"))
    plot_adherence(results, os.path.join(d, "adherence.png"))
    ks, ms, names = ks_of(results[0]), [methods_of(r) for r in results], trained(results)
    fs = checked(results)
    cfg, task = results[0]["config"], task_of(results[0])
    top = task.budgets[-1]
    secs = "; ".join(f"{n} {mean_std([arms(r)[n]['train_seconds'] for r in results], '{:.0f}')} s"
                     for n in arms(results[0]))
    md = f"""## Thinking on a budget: L1 against s1 forcing

{opening("l1", top=top)}

![accuracy against budget](l1/accuracy_vs_budget.png)

![stride mix](l1/strides.png)

![adherence](l1/adherence.png)

**Accuracy against budget** (greedy, {cfg['n_test']} test problems per k, mean over k = {ks[0]}..{ks[-1]}; mean ± std
over {len(results)} seeds; mean tokens in brackets; chance {chance_level(task, ks):.2g}):

{table_accuracy(ms, ks)}

**Right within budget** (right answer and steps ≤ b; s1 forcing is within budget by construction), mean over k:

{table_within(ms, ks, names)}

**Per k** (accuracy / mean tokens, mean over seeds), to read accuracy at equal tokens:

{table_per_k(ms, ks)}

Fixed formats on the base model per k (accuracy / tokens):

{table_fixed(ms, ks)}

**Adherence** after training (share within budget, steps ≤ b / mean |steps − b|, mean over k and seeds):

{table_adherence(ms, ks, names)}

**s1's metrics** (Muennighoff et al. 2025): Control = share within budget, Scaling = mean slope of accuracy against
mean tokens over pairs of budgets (undefined when compute does not vary), Performance = best per-budget accuracy:

{table_s1(ms, ks, names + ["s1 forcing (S cut at b)"])}

**What the model does when b < ⌈k/2⌉** (chains classified automatically by stride: the unit steps per written state),
share of outputs over those (b, k) cells:

{table_strides(results, ms, names)}

Exact labels: 
{stride_labels(results)}

Examples (first seed; budget token, problem, output, label):

```
{stride_examples(results[0])}
```

**Training log** per budget (share within / mean |steps − b| / accuracy / tokens of the GRPO samples; step 0 is
greedy before RL), mean over seeds:

{table_training_log(results)}

**Findings** (computed on this run; 95 % t-intervals over seeds; the premises first, then the primary claim):

{findings.table(fs)}

{method_note(cfg, secs, top)}"""
    return [(md, headline(results, ms, fs))]



QUESTION = """Write the budget into the prompt (B<b> in place of "=": think for b chain steps, b = 0..{top}) and
train the model with L1's rewards. Does L1's budget term teach RL from the base model to read the budget, against
the same RL whose reward ignores it? Does that beat cutting the chain (s1) at equal tokens, and what does the model
do with fewer steps than its shortest chain (S needs ⌈k/2⌉)?"""
PAPERS = """L1 / LCPO (Aggarwal & Welleck 2025, arXiv 2503.04697); s1 (Muennighoff et al. 2025, arXiv 2501.19393)."""
EXPLORE = """`reasonlab l1 --variants exact max exact+sft max+sft --alpha 0.1`, `reasonlab sample "3 5 9 2 7"
--budget 1 --checkpoint ~/.cache/reasonlab/l1-exact-seed0` (a model the run saved in the model cache)."""

register(Experiment("l1", Config, run, claims, render, question=QUESTION, papers=PAPERS, explore=EXPLORE,
                    keys=("variants", "control", "forcing", "forcing_S", "fixed", "config", "base_free"),
                    quick=Config(steps=4, sft_steps=10, n_test=8), run_cost=20, render_cost=3.0, room=room,
                    placebo=placebo, streams=1))
