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

import numpy as np

from .. import tasks
from ..core.problems import as_task, test_problems
from ..io.report import chance_at, chance_level, md_table, plt, save
from ..methods import budget
from ..methods.budget import STRIDE_GROUPS
from ..stats import findings
from ..stats.summary import pm
from ..tasks import Task, chain_steps
from ..train.zoo import store
from . import Experiment, register, task_of
from .thresholds import THRESHOLDS as TH

Variant = Literal["exact", "max", "exact+sft", "max+sft"]
VARIANTS = get_args(Variant)



def max_steps(task: str | Task) -> int:
    """The most chain steps an output of the task can hold (its format token, then a state in every other slot;
    digits: 13): steps written are in 0..max_steps whatever the model does, so a spread (steps at the largest budget
    minus at b = 0) is within ±max_steps."""
    return as_task(task).max_out - 1


@dataclass
class Config:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    variants: tuple[Variant, ...] = ("exact",)
    """budget models trained: L1-Exact or L1-Max, each optionally (+sft) after an SFT warm start on budget-annotated
    chains. The first is the primary's treatment; its control, always trained, is the same variant with alpha = 0"""
    steps: int = 100
    """GRPO steps per budget model"""
    sft_steps: int = 300
    """warm-start steps of the +sft budget models"""
    eval_n: int = 100
    """greedy test problems per k (each evaluated at every budget), drawn per seed"""
    prompts_per_step: int = 16
    """problems per GRPO step (each with its own budget)"""
    num_generations: int = 8
    """samples per problem (the group)"""
    learning_rate: float = 1e-4
    """GRPO's Adam learning rate"""
    beta: float = 0.04
    """KL weight to the starting model"""
    alpha: float = 0.25
    """L1's length weight per chain step (both rewards): one step off the budget costs Exact 0.25; 0: the reward
    ignores the budget (the control arm's value; the placebo gives it to the treatment too)"""
    delta: float = 0.5
    """L1-Max's offset: a chain exactly at the budget earns half the reward, one step under it three quarters"""
    sft_lr: float = 3e-3
    """peak learning rate of the warm start"""
    log_every: int | None = None
    """per-budget training log: one record per this many GRPO steps (None: steps // 5, at least 1)"""
    n_examples: int = 3
    """example outputs kept per (variant, stride class) for b < ceil(k/2)"""

    def validate(self) -> None:
        bad = [v for v in self.variants if v not in VARIANTS]
        if bad:
            raise ValueError(f"unknown budget variant {bad[0]!r}: choose from {', '.join(VARIANTS)}")
        if not self.variants:
            raise ValueError("l1: at least one variant")
        check_training(self, "l1")
        if self.log_every is not None and self.log_every < 1:
            raise ValueError(f"l1: log_every must be positive (or none), got {self.log_every}")

    @property
    def every(self) -> int:
        """The training log's interval, log_every resolved."""
        return self.log_every if self.log_every is not None else max(1, self.steps // 5)


def check_training(cfg, what: str) -> None:
    """The GRPO and warm-start settings that l1 and l1_recipe share (alpha = 0: a reward blind to the budget)."""
    if cfg.prompts_per_step < 1 or cfg.num_generations < 2:
        raise ValueError(f"{what}: prompts_per_step >= 1 and num_generations >= 2 (GRPO needs a group)")
    if cfg.sft_steps < 0 or cfg.alpha < 0 or cfg.beta < 0 or cfg.learning_rate <= 0 or cfg.sft_lr <= 0:
        raise ValueError(f"{what}: sft_steps >= 0, alpha >= 0, beta >= 0 and learning rates > 0")


def placebo(cfg: Config) -> Config:
    """The treatment arm replaced by the control arm: every variant trained with alpha = 0, as its control is."""
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


def budgets_of(r: dict) -> tuple[int, ...]:
    """The budgets a result was evaluated at: its task's (digits: 0..8)."""
    return task_of(r).budgets


def train_arm(cfg: Config, variant: str, alpha: float, base, seed: int, probs, env, name: str) -> dict:
    """One budget model trained with the reward weight `alpha`, saved in the model cache as `name`, evaluated at
    every budget on the test problems."""
    tr = budget.train_variant(base, variant, seed, steps=cfg.steps, prompts_per_step=cfg.prompts_per_step,
                              num_generations=cfg.num_generations, learning_rate=cfg.learning_rate, beta=cfg.beta,
                              alpha=alpha, delta=cfg.delta, sft_steps=cfg.sft_steps, sft_lr=cfg.sft_lr,
                              log_every=cfg.every, progress=True, task=cfg.task)
    store(name, {"experiment": "l1", "variant": variant, "seed": seed, **stored_config(cfg), "alpha": alpha},
          tr["model"], cache=env.cache)
    return {"variant": variant, "alpha": alpha, "train_seconds": round(tr["seconds"], 1),
            "sft_seconds": round(tr["sft_seconds"], 1), "sft_loss": tr["sft_loss"], "logs": tr["logs"],
            "reward": tr["reward"], "eval": budget.eval_budget_model(tr["model"], probs, cfg.n_examples)}


def run(cfg: Config, seed: int, env) -> dict:
    """Train every variant from the seed's base model, and the first again with alpha = 0 (the control: same seed,
    same draws); save each in the model cache and evaluate it at every budget on the seed's own test problems; then
    s1 forcing, the fixed formats and the base model's free choice on the same problems."""
    base = env.base(seed, cfg.task).eval()
    probs = test_problems(cfg.eval_n, "l1", seed, task=cfg.task)
    res: dict = {"seed": seed, "config": stored_config(cfg), "variants": {}}
    for v in cfg.variants:
        res["variants"][v] = train_arm(cfg, v, cfg.alpha, base, seed, probs, env, model_name(v, seed, env.quick))
    first = cfg.variants[0]
    res["control"] = train_arm(cfg, first, 0.0, base, seed, probs, env, model_name(f"{first}+alpha0", seed, env.quick))
    res.update(budget.eval_baselines(base, probs))
    return res


# ---------------------------------------------------------------------------------------------------------------
# Reading a result: the arms, the methods' cells, s1's metrics, the equal-token comparison.

def control_name(r: dict) -> str:
    """The control arm's method name: the first variant trained with alpha = 0."""
    return f"L1-{r['control']['variant']}, α = 0"


def arms(r: dict) -> dict:
    """{method name: trained arm} for one seed: the variants in the run's order, then the control arm."""
    return {**{f"L1-{v}": r["variants"][v] for v in variants_of(r)}, control_name(r): r["control"]}


def methods_of(r: dict) -> dict:
    """{method name: {b: {k: cell}}} for one seed: the trained arms, s1 forcing and the fixed formats (same cell at
    every budget)."""
    out = {name: a["eval"] for name, a in arms(r).items()}
    out["s1 forcing (T cut at b)"] = r["forcing"]
    out["s1 forcing (S cut at b)"] = r["forcing_S"]
    for f in "AST":
        out[f"always {f}"] = {b: r["fixed"][f] for b in budgets_of(r)}
    return out


def variants_of(r: dict) -> list[str]:
    """The variants in the order the run was asked for (a result read back from JSON has its keys sorted)."""
    return list(r["config"]["variants"])


def reward_of(variant: str) -> str:
    """The L1 reward a variant trains with: "exact" or "max"."""
    return variant.split("+")[0]


def start_of(variant: str) -> str:
    """Where a variant's RL starts, in words."""
    return "from its SFT warm start" if variant.endswith("+sft") else "from the base model"


def ks_of(r: dict) -> list[int]:
    return sorted(int(k) for k in r["fixed"]["A"])


def needs(k: int) -> int:
    """ceil(k / 2): the steps S needs, the fewest of any chain the base model knows."""
    return len(chain_steps(k, "short"))


def mean_cells(m: dict, key: str, cells) -> float:
    """Mean of `key` over (b, k) cells of one method and seed."""
    return float(np.mean([m[b][k][key] for b, k in cells]))


def cells_where(r: dict, low: bool | None) -> list[tuple[int, int]]:
    """(b, k) cells with b < ceil(k/2) (low=True), b >= ceil(k/2) (low=False), or all (None)."""
    return [(b, k) for b in budgets_of(r) for k in ks_of(r) if low is None or (b < needs(k)) == low]


def spread(m: dict, ks: list[int]) -> float:
    """Chain steps at the largest budget (digits: 8) minus at b = 0, mean over k, for one method's cells: 0 for a
    model that ignores b."""
    top = max(m)
    return float(np.mean([m[top][k]["steps"] - m[0][k]["steps"] for k in ks]))


def pays(r: dict, kind: str) -> float:
    """What reading the budget is worth under L1-<kind>'s reward with the base model's formats (A, S, T forced, at
    their accuracies and steps on this seed's problems): the best budget-aware policy's expected reward minus the
    best budget-blind one's, budgets uniform over the task's (digits: 0..8; budget.best_policies)."""
    opts = [[(r["fixed"][f][k]["acc"], r["fixed"][f][k]["steps"]) for f in "AST"] for k in ks_of(r)]
    got = budget.best_policies(opts, kind, r["config"]["alpha"], r["config"]["delta"], reachable=False,
                               task=task_of(r))
    return got["aware"] - got["blind"]


def s1_metrics(m: dict, ks: list[int]) -> dict:
    """s1's metrics for one method and seed (Muennighoff et al. 2025, section 3.2): Control = share of outputs
    within budget (steps <= b); Scaling = the mean slope of accuracy against compute over pairs of budgets (per-budget
    means over k), over the pairs whose compute differs (None when compute does not vary: undefined);
    Performance = best per-budget accuracy."""
    bs = sorted(m)
    acc = [np.mean([m[b][k]["acc"] for k in ks]) for b in bs]
    tok = [np.mean([m[b][k]["tokens"] for k in ks]) for b in bs]
    within = [m[b][k].get("within", float(m[b][k]["steps"] <= b)) for b in bs for k in ks]
    slopes = [(acc[j] - acc[i]) / (tok[j] - tok[i]) for i in range(len(tok)) for j in range(i + 1, len(tok))
              if abs(tok[j] - tok[i]) > 1e-6]
    return {"control": float(np.mean(within)), "scaling": float(np.mean(slopes)) if slopes else None,
            "performance": float(max(acc))}


def equal_token_gain(m: dict, ref: dict, cells) -> float:
    """Mean over cells of (accuracy of m) - (accuracy of ref interpolated at m's mean tokens on ref's accuracy-
    against-tokens curve for that k, clamped at its ends): more accurate at equal tokens when > 0."""
    gains = []
    for b, k in cells:
        c = m[b][k]
        pts = sorted((ref[bb][k]["tokens"], ref[bb][k]["acc"]) for bb in ref)
        t, a = zip(*pts)
        gains.append(c["acc"] - float(np.interp(c["tokens"], t, a)))
    return float(np.mean(gains))


def blind(m: dict, r: dict) -> dict:
    """The budget-blind control as a curve per k: the base model's fixed formats A, S and T (accuracy against
    tokens), in budget slots so that equal_token_gain reads it like a method."""
    return {b: r["fixed"]["AST"[min(b, 2)]] for b in budgets_of(r)}


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


# ---------------------------------------------------------------------------------------------------------------
# The section: plots, tables, text.

def plot_accuracy(results: list[dict], path: str) -> str:
    """Accuracy against budget per k, one line per method (mean over seeds, band = min..max), chance dashed."""
    ks, ms, bs, task = ks_of(results[0]), [methods_of(r) for r in results], budgets_of(results[0]), task_of(results[0])
    cols = (len(ks) + 2) // 2                          # a panel per k and one for the legend (digits: 2 x 4)
    fig, axes = plt.subplots(2, cols, figsize=(4 * cols, 7.5), sharey=True, layout="constrained")
    for ax, k in zip(axes.flat, ks):
        for name in ms[0]:
            acc = np.array([[m[name][b][k]["acc"] for b in bs] for m in ms])
            style = ":" if name.startswith("always") else "--" if name.startswith("s1") else "-"
            ax.plot(bs, acc.mean(0), style, marker="o" if style == "-" else None, ms=3, label=name)
            if style == "-":
                ax.fill_between(bs, acc.min(0), acc.max(0), alpha=0.15)
        ax.axhline(chance_at(task, k), color="grey", lw=0.8, ls="--")
        ax.axvline(needs(k) - 0.5, color="k", lw=0.5, alpha=0.4)
        ax.set_title(f"k = {k} (S needs {needs(k)} steps)")
        ax.set_xlabel("budget b (chain steps)")
    axes.flat[0].set_ylabel("greedy accuracy")
    for ax in axes.flat[len(ks):]:
        ax.axis("off")
    h, lab = axes.flat[0].get_legend_handles_labels()
    axes.flat[-1].legend(h + [plt.Line2D([], [], color="grey", ls="--")], lab + [f"chance ({chance_level(task):.2g})"],
                         loc="center")
    fig.suptitle("Accuracy against budget (mean over seeds, band = min..max; vertical line: b = ceil(k/2))")
    return save(fig, path)


def plot_strides(results: list[dict], path: str) -> str:
    """Stride mix of the trained models' chains, by budget (x) and k (panels), mean over seeds."""
    names, ks, bs = list(arms(results[0])), ks_of(results[0]), budgets_of(results[0])
    colors = dict(zip(STRIDE_GROUPS, ["#4C72B0", "#55A868", "#DD8452", "#C44E52", "#8172B2", "#937860", "#999999"]))
    fig, axes = plt.subplots(len(names), len(ks), figsize=(2.3 * len(ks), 2.4 * len(names) + 0.6), sharey=True,
                             squeeze=False, layout="constrained")
    for i, n in enumerate(names):
        for j, k in enumerate(ks):
            ax, bottom = axes[i][j], np.zeros(len(bs))
            for g in STRIDE_GROUPS:
                y = np.array([np.mean([arms(r)[n]["eval"][b][k]["strides"].get(g, 0.0) for r in results])
                              for b in bs])
                ax.bar(bs, y, bottom=bottom, color=colors[g], label=g, width=0.85)
                bottom += y
            ax.axvline(needs(k) - 0.5, color="k", lw=0.8)
            ax.set_title(f"{n}, k = {k}", fontsize=8)
            ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=6, loc="lower left")
    fig.supxlabel("budget b (vertical line: b = ceil(k/2))")
    fig.supylabel("share of outputs")
    return save(fig, path)


def plot_adherence(results: list[dict], path: str) -> str:
    """Left: steps written against budget (mean over k and seeds) per method, diagonal = exact adherence.
    Right: share within budget during training, per trained arm (mean over budgets and seeds)."""
    ks, ms, bs = ks_of(results[0]), [methods_of(r) for r in results], budgets_of(results[0])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5), layout="constrained")
    for name in ms[0]:
        if name.startswith("always"):
            continue
        y = np.array([[np.mean([m[name][b][k]["steps"] for k in ks]) for b in bs] for m in ms])
        a1.errorbar(bs, y.mean(0), yerr=y.std(0), marker="o", ms=3, capsize=2, label=name)
    a1.plot(bs, bs, "k:", lw=0.8, label="steps = b")
    a1.set_xlabel("budget b")
    a1.set_ylabel(f"chain steps written (mean over k = {ks[0]}..{ks[-1]})")
    a1.legend(fontsize=8)
    for n in arms(results[0]):
        logs = [arms(r)[n]["logs"] for r in results]
        steps = [l["step"] for l in logs[0]]
        y = np.array([[np.mean([c["within"] for c in l["by_budget"].values()]) for l in lg] for lg in logs])
        a2.plot(steps, y.mean(0), marker="o", ms=3, label=n)
    a2.set_xlabel("GRPO step (step 0: greedy, before RL)")
    a2.set_ylabel("share within budget (steps <= b)")
    a2.set_ylim(0, 1.02)
    a2.legend(fontsize=8)
    fig.suptitle("Adherence: steps against budget after training; share within budget during training")
    return save(fig, path)


def _ms(xs, f="{:.2f}") -> str:
    """pm at two decimals."""
    return pm(xs, f)


def by_budget(first: list[str], bs, last: list[str] = ()) -> list[str]:
    """A header: the first columns, one per budget of bs, the last ones."""
    return [*first, *(f"b={b}" for b in bs), *last]


def budgets_in(ms: list[dict]) -> list[int]:
    """The budgets of the methods' cells (every method has its task's)."""
    return sorted(next(iter(ms[0].values())))


def trained(results: list[dict]) -> list[str]:
    """The trained arms' method names (the control last), then s1's T forcing."""
    return [*arms(results[0]), "s1 forcing (T cut at b)"]


def table_accuracy(ms: list[dict], ks: list[int]) -> str:
    """Accuracy (mean ± std over seeds) with mean tokens in brackets, by method and budget, mean over k."""
    bs = budgets_in(ms)
    return md_table(by_budget(["method"], bs), [
        [n] + [_ms([np.mean([m[n][b][k]["acc"] for k in ks]) for m in ms])
               + f" ({np.mean([m[n][b][k]['tokens'] for m in ms for k in ks]):.1f})" for b in bs]
        for n in ms[0]])


def table_within(ms: list[dict], ks: list[int], names: list[str]) -> str:
    """Right within budget (right answer and steps <= b), by method and budget, mean over k."""
    bs = budgets_in(ms)
    return md_table(by_budget(["method"], bs), [
        [n] + [_ms([np.mean([m[n][b][k]["acc_within"] for k in ks]) for m in ms]) for b in bs] for n in names])


def table_per_k(ms: list[dict], ks: list[int]) -> str:
    """Accuracy / mean tokens for every method but the fixed formats, k and budget, mean over seeds."""
    bs = budgets_in(ms)
    return md_table(by_budget(["method", "k"], bs), [
        [n, k] + [f"{np.mean([m[n][b][k]['acc'] for m in ms]):.2f} / {np.mean([m[n][b][k]['tokens'] for m in ms]):.1f}"
                  for b in bs]
        for n in ms[0] if n not in ("always A", "always S", "always T") for k in ks])


def table_fixed(ms: list[dict], ks: list[int]) -> str:
    """The fixed formats on the base model per k: accuracy / tokens, mean over seeds."""
    return md_table(["k"] + [f"always {f}" for f in "AST"], [
        [k] + [f"{np.mean([m[f'always {f}'][0][k]['acc'] for m in ms]):.2f} / "
               f"{np.mean([m[f'always {f}'][0][k]['tokens'] for m in ms]):.1f}" for f in "AST"] for k in ks])


def table_adherence(ms: list[dict], ks: list[int], names: list[str]) -> str:
    """Share within budget / mean |steps - b| by method and budget (and over all budgets), mean over k and seeds."""
    def cell(n, cells):
        w = [np.mean([m[n][bb][k]["within"] for bb in cells for k in ks]) for m in ms]
        e = [np.mean([m[n][bb][k]["abs_err"] for bb in cells for k in ks]) for m in ms]
        return f"{np.mean(w):.2f} / {np.mean(e):.2f}"
    bs = budgets_in(ms)
    return md_table(by_budget(["method"], bs, ["all"]),
                    [[n] + [cell(n, (b,)) for b in bs] + [cell(n, bs)] for n in names])


def table_s1(ms: list[dict], ks: list[int], names: list[str]) -> str:
    """s1's Control, Scaling and Performance by method, mean ± std over seeds."""
    rows = []
    for n in names:
        mm = [s1_metrics(m[n], ks) for m in ms]
        scal = [x["scaling"] for x in mm]
        rows.append([n, _ms([x["control"] for x in mm]),
                     "undefined (compute does not vary)" if None in scal else _ms(scal, "{:.3f}"),
                     _ms([x["performance"] for x in mm], "{:.3f}")])
    return md_table(["method", "Control (share within budget)", "Scaling (accuracy per token)",
                     "Performance (best accuracy)"], rows)


def table_strides(results: list[dict], ms: list[dict], names: list[str]) -> str:
    """The stride groups' shares of the outputs over the (b, k) cells with b < ceil(k/2), mean over seeds."""
    def share(n, g):
        return np.mean([m[n][b][k]["strides"].get(g, 0.0) for m, r in zip(ms, results) for b, k in cells_where(r, True)])
    return md_table(["method", *STRIDE_GROUPS], [[n] + [f"{share(n, g):.2f}" for g in STRIDE_GROUPS] for n in names])


def stride_labels(results: list[dict]) -> str:
    """classify_chain's exact labels per trained arm over the cells with b < ceil(k/2), most frequent first."""
    lines = []
    for n in arms(results[0]):
        cnt: dict[str, float] = {}
        cells = [(r, b, k) for r in results for b, k in cells_where(r, True)]
        for r, b, k in cells:
            for lab, x in arms(r)[n]["eval"][b][k]["stride_labels"].items():
                cnt[lab] = cnt.get(lab, 0.0) + x / len(cells)
        ranked = sorted(cnt.items(), key=lambda kv: -kv[1])
        lines.append(f"- {n}: " + ", ".join(f"{lab} {x:.3f}" for lab, x in ranked))
    return "\n".join(lines)


def stride_examples(r: dict) -> str:
    """Up to two example outputs per trained arm and stride group of one seed, with b < ceil(k/2)."""
    lines = []
    for n, a in arms(r).items():
        seen: dict[str, list] = {}
        for b, k in cells_where(r, True):
            for g, exs in a["eval"][b][k].get("examples", {}).items():
                for e in exs:
                    if len(seen.setdefault(g, [])) < 2:
                        seen[g].append(f"B{b} {e}")
        for g, exs in seen.items():
            lines += [f"    {n:<16} {g:<18} {e}" for e in exs]
    return "\n".join(lines) or "    (none)"


def table_training_log(results: list[dict]) -> str:
    """The GRPO samples' within / |steps - b| / accuracy / tokens per budget at the first, middle and last log
    record, mean over seeds."""
    rows, bs = [], budgets_of(results[0])
    for n in arms(results[0]):
        for i in (0, len(arms(results[0])[n]["logs"]) // 2, -1):
            lg = [arms(r)[n]["logs"][i] for r in results]

            def at(b, key):   # a short log window may have drawn no prompt with budget b: "–"
                xs = [c[key] for c in (log["by_budget"].get(b) for log in lg) if c]
                return f"{np.mean(xs):.2f}" if xs else "–"
            rows.append([n, lg[0]["step"]] + [
                " / ".join(at(b, key) for key in ("within", "abs_err", "acc", "tokens")) for b in bs])
    return md_table(by_budget(["arm", "step"], bs), rows)


def headline(results: list[dict], ms: list[dict], fs: list[dict]) -> str:
    """The primary's arms: each one's spread (steps at the largest budget minus at b = 0), their difference and its
    verdict."""
    prim = next(f for f in fs if findings.kind_of(f) == findings.PRIMARY)
    first, ctl = f"L1-{variants_of(results[0])[0]}", control_name(results[0])
    return (f"spread (steps at b = {budgets_of(results[0])[-1]} - b = 0): {first} {_ms(prim['spread_treatment'])}, "
            f"{ctl} {_ms(prim['spread_control'])}; difference {prim['value']:+.2f} [{findings._num(prim['ci95'][0])}, "
            f"{findings._num(prim['ci95'][1])}] ({prim['verdict']})")


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
    secs = "; ".join(f"{n} {_ms([arms(r)[n]['train_seconds'] for r in results], '{:.0f}')} s"
                     for n in arms(results[0]))
    md = f"""## Thinking on a budget: L1 against s1 forcing

> **Question.** Write the budget into the prompt (B<b> in place of "=": think for b chain steps, b = 0..{top}) and train
> the model with L1's rewards. Does L1's budget term teach RL from the base model to read the budget, against the
> same RL whose reward ignores it? Does that beat cutting the chain (s1) at equal tokens, and what does the model do
> with fewer steps than its shortest chain (S needs ⌈k/2⌉)?

![accuracy against budget](l1/accuracy_vs_budget.png)

![stride mix](l1/strides.png)

![adherence](l1/adherence.png)

**Accuracy against budget** (greedy, {cfg['eval_n']} test problems per k, mean over k = {ks[0]}..{ks[-1]}; mean ± std
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


def method_note(cfg: dict, secs: str, top: int = 8) -> str:
    """The section's closing paragraphs: the training settings, the controls, where L1 differs, the papers (top: the
    largest budget)."""
    first = cfg["variants"][0]
    return f"""GRPO ({cfg['steps']} steps, {cfg['prompts_per_step']} problems × {cfg['num_generations']} samples, lr
{cfg['learning_rate']:g}, β {cfg['beta']:g}), one budget drawn uniformly per problem; α = {cfg['alpha']:g} per
step, δ = {cfg['delta']:g}; `+sft` variants first fine-tune {cfg['sft_steps']} steps on budget-annotated outputs
(the longest fixed format within the budget). Training time per seed: {secs}.

**The primary's control** is L1-{first} trained again with α = 0: the same start, seed, problems, budgets and
GRPO, a reward that pays correctness alone, so whatever budget reading it shows comes from the budget token and
RL, not from L1's budget term; the placebo (`reasonlab lab --placebo`) trains the treatment with α = 0 too.
Whether reading pays at all is a premise per reward: the best budget-aware policy over the base model's forced
formats (A, S, T, at their accuracies and steps on the seed's test problems) must earn at least
{TH['l1.aware_gap'].value:g} more expected reward than the best budget-blind one, b uniform over 0..{top}
(`budget.best_policies`); the claims on the variants trained with that reward require it. The other controls:
s1 forcing forces a T (or S) chain on the base model and forces "A" after b steps (`tts.budget_hook`); equal tokens:
each budget model's accuracy minus the control's curve (per k, interpolated at the same mean tokens; tokens up to
the answer and </s>), against both forcings and the budget-blind fixed formats (the A, S, T points per k): a model
that writes S chains whatever b says would win a comparison with a truncated T chain alone. Every seed scores its
own test problems (`test_problems(eval_n, "l1", seed)`); training draws from the train part.

L1's paper and code differ from this port in where Max starts (the Exact checkpoint, there), in n (the whole
response, there) and in the budget's form (a number in the prompt); Max's (clip(α(b − n), −1, 1) + 1)/2 is the
paper's clip with δ = 0.5 (budget.py's docstring has the details). L1-Max from the base model has little to learn
(its premise prices it; the `l1_recipe` lesson too), which is why the lab trains L1-Exact. L1's own recipe, Exact
first and Max from Exact on budgets a chain can reach, is the `l1_recipe` lesson (`reasonlab l1_recipe`).

*Papers:* L1 / LCPO (Aggarwal & Welleck 2025, arXiv 2503.04697); s1 (Muennighoff et al. 2025, arXiv 2501.19393).
*Explore:* `reasonlab l1 --variants exact max exact+sft max+sft --alpha 0.1`, `reasonlab sample "3 5 9 2 7"
--budget 1 --checkpoint ~/.cache/reasonlab/l1-exact-seed0` (a model the run saved in the model cache).
"""


register(Experiment("l1", Config, run, claims, render,
                    keys=("variants", "control", "forcing", "forcing_S", "fixed", "config", "base_free"),
                    quick=Config(steps=4, sft_steps=10, eval_n=8), run_cost=20, render_cost=3.0, room=room,
                    placebo=placebo))
