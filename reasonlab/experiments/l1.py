"""8. Thinking on a budget: L1-Max trained by GRPO, with and without a supervised warm start, against s1 forcing."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..methods import budget
from ..methods.budget import (
    BUDGETS,
    STRIDE_GROUPS,
    cells_where,
    equal_token_gain,
    ks_of,
    mean_cells,
    methods_of,
    s1_metrics,
    variants_of,
)
from ..methods.config import VARIANTS
from ..stats import findings
from ..stats.summary import pm
from . import Experiment, register
from .plots import plot_accuracy, plot_adherence, plot_strides
from .thresholds import THRESHOLDS as TH


@dataclass
class Config:
    variants: tuple[str, ...] = ("max", "max+sft")
    """budget models trained (see VARIANTS): the lab runs the pair that asks whether RL alone learns to
    read the budget; `reasonlab budget` runs all four"""
    steps: int = 100
    """GRPO steps per budget model"""
    sft_steps: int = 300
    """warm-start steps of the +sft budget models"""
    eval_n: int = 100
    """greedy test problems per k and budget"""

    def validate(self) -> None:
        bad = [v for v in self.variants if v not in VARIANTS]
        if bad:
            raise ValueError(f"unknown budget variant {bad[0]!r}: choose from {', '.join(VARIANTS)}")


def run(cfg: Config, seed: int, env) -> dict:
    bc = budget.BudgetConfig(variants=tuple(cfg.variants), steps=cfg.steps, sft_steps=cfg.sft_steps,
                             eval_n=cfg.eval_n, log_every=max(1, cfg.steps // 5))
    return budget.run(bc, seed, base=env.base(seed), log=None, progress=True)


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    md, head = page(rs, out, prefix="l1")
    return [(md, head)]





def blind(m: dict, r: dict) -> dict:
    """The budget-blind control as a curve per k: the base model's fixed formats A, S and T (accuracy against
    tokens), in budget slots so that equal_token_gain reads it like a method."""
    return {b: r["fixed"]["AST"[min(b, 2)]] for b in BUDGETS}


def claims(results: list[dict]) -> list[dict]:
    """The checked claims, primary first: whether RL from the base model (the first variant) learns to read its
    budget. Every "beats s1 forcing" claim also beats the budget-blind control, the fixed formats A / S / T at equal
    tokens (a model that ignores the budget and writes S chains would pass a comparison with a truncated T chain),
    and forcing S as well as T."""
    ms = [methods_of(r) for r in results]
    vs = variants_of(results[0])
    allc = [cells_where(r, None) for r in results]

    def spread(m, r, n):                       # chain steps at b = 8 minus at b = 0, mean over k
        return float(np.mean([m[n][8][k]["steps"] - m[n][0][k]["steps"] for k in ks_of(r)]))

    out = []
    for v in vs:
        name = f"L1-{v}"
        out.append(findings.seed_check("8 budget", f"{name} reads its budget: it writes more than one chain step more at b = 8 "
                                "than at b = 0", "steps(b = 8) - steps(b = 0), mean over k",
                                [spread(m, r, name) for r, m in zip(results, ms)], TH["l1.reads"]))
    for v in vs:
        name = f"L1-{v}"
        if not v.startswith("exact"):
            out.append(findings.seed_check("8 budget", f"{name} keeps the budget (s1's Control): share of outputs with steps "
                                    "<= b", "share within budget, all (b, k)",
                                    [mean_cells(m[name], "within", c) for m, c in zip(ms, allc)], TH["l1.control"]))
        scal = [s1_metrics(m[name], ks_of(r))["scaling"] for r, m in zip(results, ms)]
        out.append(findings.seed_check("8 budget", f"{name} scales (s1's Scaling): accuracy rises with compute across budgets",
                                "mean pairwise slope of accuracy against tokens",
                                [x if x is not None else 0.0 for x in scal], TH["l1.scaling"],
                                untestable=None if None not in scal else
                                "no variance by construction: compute does not vary across budgets"))
        gains = {ctl: [equal_token_gain(m[name], ref(m, r), c) for m, r, c in zip(ms, results, allc)]
                 for ctl, ref in (("s1 forcing (T cut at b)", lambda m, r: m["s1 forcing (T cut at b)"]),
                                  ("s1 forcing (S cut at b)", lambda m, r: m["s1 forcing (S cut at b)"]),
                                  ("fixed formats", blind))}
        worst = [min(g) for g in zip(*gains.values())]
        out.append(findings.seed_check("8 budget", f"at equal tokens, {name} is more accurate than s1 forcing (T and S "
                                "chains) and than the budget-blind fixed formats", "smallest of the three "
                                "equal-token accuracy gains, all (b, k)", worst, TH["l1.equal_tokens"],
                                control="fixed formats", **{k: [round(x, 4) for x in g] for k, g in gains.items()}))
    for v in vs:
        if v.endswith("+sft") and v[:-4] in vs:
            cold, warm = f"L1-{v[:-4]}", f"L1-{v}"
            out.append(findings.seed_check("8 budget", f"no SFT warm start needed: {cold} (RL from the base) reads its budget "
                                    f"within one step as well as {warm}", f"spread({cold}) - spread({warm})",
                                    [spread(m, r, cold) - spread(m, r, warm) for r, m in zip(results, ms)],
                                    TH["l1.no_sft"]))
    return out


def _ms(xs, f="{:.2f}") -> str:
    """pm at two decimals."""
    return pm(xs, f)


def page(results: list[dict], out: str, prefix: str = "") -> tuple[str, str]:
    """The report section (markdown) and a one-line headline; plots go to <out>/<prefix>/."""
    d = os.path.join(out, prefix)
    os.makedirs(d, exist_ok=True)
    rel = (prefix + "/") if prefix else ""
    plot_accuracy(results, os.path.join(d, "accuracy_vs_budget.png"))
    plot_strides(results, os.path.join(d, "strides.png"))
    plot_adherence(results, os.path.join(d, "adherence.png"))
    ks, ms, vs = ks_of(results[0]), [methods_of(r) for r in results], variants_of(results[0])
    names = list(ms[0])
    # accuracy (tokens) against budget, mean over k
    head = "| method | " + " | ".join(f"b={b}" for b in BUDGETS) + " |"
    acc_rows = [head, "|---" * (len(BUDGETS) + 1) + "|"]
    for n in names:
        acc_rows.append(f"| {n} | " + " | ".join(
            _ms([np.mean([m[n][b][k]["acc"] for k in ks]) for m in ms]) +
            f" ({np.mean([m[n][b][k]['tokens'] for m in ms for k in ks]):.1f})" for b in BUDGETS) + " |")
    # right within budget (right answer and steps <= b), mean over k
    aw_rows = [head, "|---" * (len(BUDGETS) + 1) + "|"]
    for n in [f"L1-{v}" for v in vs] + ["s1 forcing (T cut at b)"]:
        aw_rows.append(f"| {n} | " + " | ".join(
            _ms([np.mean([m[n][b][k]["acc_within"] for k in ks]) for m in ms]) for b in BUDGETS) + " |")
    # per k at equal tokens: accuracy / tokens for every method and k
    perk = ["| method | k | " + " | ".join(f"b={b}" for b in BUDGETS) + " |", "|---" * (len(BUDGETS) + 2) + "|"]
    for n in names:
        if n in ("always A", "always S", "always T"):
            continue
        for k in ks:
            perk.append(f"| {n} | {k} | " + " | ".join(
                f"{np.mean([m[n][b][k]['acc'] for m in ms]):.2f} / "
                f"{np.mean([m[n][b][k]['tokens'] for m in ms]):.1f}" for b in BUDGETS) + " |")
    fixed_k = "| k | " + " | ".join(f"always {f}" for f in "AST") + " |\n|---|---|---|---|\n" + "\n".join(
        f"| {k} | " + " | ".join(f"{np.mean([m[f'always {f}'][0][k]['acc'] for m in ms]):.2f} / "
                                 f"{np.mean([m[f'always {f}'][0][k]['tokens'] for m in ms]):.1f}" for f in "AST")
        + " |" for k in ks)
    # adherence
    adh = ["| method | " + " | ".join(f"b={b}" for b in BUDGETS) + " | all |", "|---" * (len(BUDGETS) + 2) + "|"]
    for n in [f"L1-{v}" for v in vs] + ["s1 forcing (T cut at b)"]:
        cells = []
        for b in BUDGETS + (None,):
            bs = BUDGETS if b is None else (b,)
            w = [np.mean([m[n][bb][k]["within"] for bb in bs for k in ks]) for m in ms]
            e = [np.mean([m[n][bb][k]["abs_err"] for bb in bs for k in ks]) for m in ms]
            cells.append(f"{np.mean(w):.2f} / {np.mean(e):.2f}")
        adh.append(f"| {n} | " + " | ".join(cells) + " |")
    # s1 metrics
    s1 = ["| method | Control (share within budget) | Scaling (accuracy per token) | Performance (best accuracy) |",
          "|---|---|---|---|"]
    for n in [f"L1-{v}" for v in vs] + ["s1 forcing (T cut at b)", "s1 forcing (S cut at b)"]:
        mm = [s1_metrics(m[n], ks) for m in ms]
        scal = [x["scaling"] for x in mm]
        s1.append(f"| {n} | {_ms([x['control'] for x in mm])} | "
                  f"{'undefined (compute does not vary)' if None in scal else _ms(scal, '{:.3f}')} | "
                  f"{_ms([x['performance'] for x in mm], '{:.3f}')} |")
    # strides when b < ceil(k/2), and examples
    st = ["| method | " + " | ".join(STRIDE_GROUPS) + " |", "|---" * (len(STRIDE_GROUPS) + 1) + "|"]
    for n in [f"L1-{v}" for v in vs] + ["s1 forcing (T cut at b)"]:
        st.append(f"| {n} | " + " | ".join(
            f"{np.mean([m[n][b][k]['strides'].get(g, 0.0) for m, r in zip(ms, results) for b, k in cells_where(r, True)]):.2f}"
            for g in STRIDE_GROUPS) + " |")
    labels: dict[str, dict[str, float]] = {}
    for v in vs:
        cnt: dict[str, float] = {}
        cells = [(r, b, k) for r in results for b, k in cells_where(r, True)]
        for r, b, k in cells:
            for lab, x in r["variants"][v]["eval"][b][k]["stride_labels"].items():
                cnt[lab] = cnt.get(lab, 0.0) + x / len(cells)
        labels[v] = dict(sorted(cnt.items(), key=lambda kv: -kv[1]))
    lab_lines = "\n".join(f"- L1-{v}: " + ", ".join(f"{lab} {x:.3f}" for lab, x in labels[v].items()) for v in vs)
    ex_lines = []
    r0 = results[0]
    for v in vs:
        seen: dict[str, list] = {}
        for b, k in cells_where(r0, True):
            for g, exs in r0["variants"][v]["eval"][b][k].get("examples", {}).items():
                for e in exs:
                    if len(seen.setdefault(g, [])) < 2:
                        seen[g].append(f"B{b} {e}")
        for g, exs in seen.items():
            ex_lines += [f"    L1-{v:<9} {g:<18} {e}" for e in exs]
    # training log: adherence per budget at the first and last record
    tl = ["| variant | step | " + " | ".join(f"b={b}" for b in BUDGETS) + " |", "|---" * (len(BUDGETS) + 2) + "|"]
    for v in vs:
        for i in (0, len(results[0]["variants"][v]["logs"]) // 2, -1):
            lg = [r["variants"][v]["logs"][i] for r in results]
            def at(b, key):   # a short log window may have drawn no prompt with budget b: "–"
                xs = [c[key] for c in (l["by_budget"].get(b) for l in lg) if c]
                return f"{np.mean(xs):.2f}" if xs else "–"
            tl.append(f"| L1-{v} | {lg[0]['step']} | " + " | ".join(
                " / ".join(at(b, key) for key in ("within", "abs_err", "acc", "tokens")) for b in BUDGETS) + " |")
    fs = claims(results)
    f_lines = findings.table(fs)
    secs = "; ".join(f"L1-{v} {_ms([r['variants'][v]['train_seconds'] for r in results], '{:.0f}')} s"
                     for v in vs)
    cfg = results[0]["config"]
    main = "L1-" + next((v for v in ("max+sft", "max", "exact+sft") if v in vs), vs[0])
    gain = next((f for f in fs if f["claim"].startswith(f"at equal tokens, {main} ")), None)
    ctrl = [s1_metrics(m[main], ks)["control"] for m in ms]
    headline = (f"{main}: within budget {_ms(ctrl)}, best accuracy "
                f"{_ms([s1_metrics(m[main], ks)['performance'] for m in ms])}"
                + (f"; vs s1 forcing and always-S at equal tokens: {gain['value']:+.3f} "
                   f"[{findings._num(gain['ci95'][0])}, {findings._num(gain['ci95'][1])}] ({gain['verdict']})" if gain else ""))
    md = f"""## Thinking on a budget: L1 against s1 forcing

> **Question.** Write the budget into the prompt (B<b> in place of "=": think for b chain steps, b = 0..8) and train
> the model to keep it with L1's rewards. Does that beat cutting the chain (s1) at equal tokens, and what does the
> model do with fewer steps than its shortest chain (S needs ⌈k/2⌉)?

![accuracy against budget]({rel}accuracy_vs_budget.png)

![stride mix]({rel}strides.png)

![adherence]({rel}adherence.png)

**Accuracy against budget** (greedy, {cfg['eval_n']} test problems per k, mean over k = 2..8; mean ± std over
{len(results)} seeds; mean tokens in brackets; chance 0.1):

{chr(10).join(acc_rows)}

**Right within budget** (right answer and steps ≤ b; s1 forcing is within budget by construction), mean over k:

{chr(10).join(aw_rows)}

**Per k** (accuracy / mean tokens, mean over seeds), to read accuracy at equal tokens:

{chr(10).join(perk)}

Fixed formats on the base model per k (accuracy / tokens):

{fixed_k}

**Adherence** after training (share within budget, steps ≤ b / mean |steps − b|, mean over k and seeds):

{chr(10).join(adh)}

**s1's metrics** (Muennighoff et al. 2025): Control = share within budget, Scaling = mean slope of accuracy against
mean tokens over pairs of budgets (undefined when compute does not vary), Performance = best per-budget accuracy:

{chr(10).join(s1)}

**What the model does when b < ⌈k/2⌉** (chains classified automatically by stride: the digits summed per step),
share of outputs over those (b, k) cells:

{chr(10).join(st)}

Exact labels: 
{lab_lines}

Examples (first seed; budget token, problem, output, label):

```
{chr(10).join(ex_lines) or '    (none)'}
```

**Training log** per budget (share within / mean |steps − b| / accuracy / tokens of the GRPO samples; step 0 is
greedy before RL), mean over seeds:

{chr(10).join(tl)}

**Findings** (computed on this run; 95 % t-intervals over seeds; the first is this experiment's primary claim):

{f_lines}

GRPO ({cfg['steps']} steps, {cfg['prompts_per_step']} problems × {cfg['num_generations']} samples, lr
{cfg['learning_rate']:g}, β {cfg['beta']:g}), one budget drawn uniformly per problem; α = {cfg['alpha']:g} per
step, δ = {cfg['delta']:g}; `+sft` variants first fine-tune {cfg['sft_steps']} steps on budget-annotated outputs
(the longest fixed format within the budget). Training time per seed: {secs}. s1 forcing forces a T (or S) chain
on the base model and forces "A" after b steps (`tts.budget_hook`); equal tokens: each budget model's accuracy minus
the control's curve (per k, interpolated at the same mean tokens; tokens up to the answer and </s>). The controls
are both forcings and the budget-blind fixed formats (the A, S, T points per k): a model that writes S chains
whatever b says would win a comparison with a truncated T chain alone. L1's paper and code differ from this port in
where Max starts (the Exact checkpoint, there), in n (the whole response, there) and in the budget's form (a number
in the prompt); Max's (clip(α(b − n), −1, 1) + 1)/2 is the paper's clip with δ = 0.5 (budget.py's docstring has the
details). L1-Max from the base model is the lesson it is: RL cannot find what the policy never writes (the base
model writes one format per k whatever b says, and with its accuracies a budget-aware policy would earn little more
L1-Max reward than a budget-blind one: the `l1_recipe` lesson prices it). L1's own recipe, Exact first and Max from Exact on
budgets a chain can reach, is the `l1_recipe` lesson (`reasonlab l1_recipe`).

*Papers:* L1 / LCPO (Aggarwal & Welleck 2025, arXiv 2503.04697); s1 (Muennighoff et al. 2025, arXiv 2501.19393).
*Explore:* `reasonlab budget --variants exact max exact+sft max+sft --alpha 0.1`, `reasonlab sample "3 5 9 2 7"
--budget 1 --checkpoint runs/budget/model-max-sft-seed0` (a model the CLI saved).
"""
    return md, headline


register(Experiment("l1", Config, run, claims, render, keys=("variants", "forcing", "forcing_S", "fixed", "config", "base_free"), quick=Config(steps=4, sft_steps=10, eval_n=8), run_cost=21,
                    render_cost=3.0))
