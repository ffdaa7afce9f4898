"""The l1 experiment's results, read: the arms and methods of a result, s1's metrics, the equal-token comparison,
and the section's plots, tables and text. `l1.py` holds the experiment (its config, run, claims and render)."""
from __future__ import annotations

import numpy as np

from ..io.report import chance_at, chance_level, md_table, plt, save
from ..methods import budget
from ..methods.strides import STRIDE_GROUPS
from ..stats import findings
from ..stats.summary import pm
from ..tasks import chain_steps
from . import reading, task_of
from .thresholds import THRESHOLDS as TH


def budgets_of(r: dict) -> tuple[int, ...]:
    """The budgets a result was evaluated at: its task's (digits: 0..8)."""
    return task_of(r).budgets


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


def mean_std(xs, f="{:.2f}") -> str:
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
        [n] + [mean_std([np.mean([m[n][b][k]["acc"] for k in ks]) for m in ms])
               + f" ({np.mean([m[n][b][k]['tokens'] for m in ms for k in ks]):.1f})" for b in bs]
        for n in ms[0]])


def table_within(ms: list[dict], ks: list[int], names: list[str]) -> str:
    """Right within budget (right answer and steps <= b), by method and budget, mean over k."""
    bs = budgets_in(ms)
    return md_table(by_budget(["method"], bs), [
        [n] + [mean_std([np.mean([m[n][b][k]["acc_within"] for k in ks]) for m in ms]) for b in bs] for n in names])


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
        rows.append([n, mean_std([x["control"] for x in mm]),
                     "undefined (compute does not vary)" if None in scal else mean_std(scal, "{:.3f}"),
                     mean_std([x["performance"] for x in mm], "{:.3f}")])
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
    prim = findings.as_judged(next(f for f in fs if findings.kind_of(f) == findings.PRIMARY))   # the lab's verdict
    first, ctl = f"L1-{variants_of(results[0])[0]}", control_name(results[0])
    return (f"spread (steps at b = {budgets_of(results[0])[-1]} - b = 0): {first} {mean_std(prim['spread_treatment'])}, "
            f"{ctl} {mean_std(prim['spread_control'])}; difference {prim['value']:+.2f} [{findings._num(prim['ci95'][0])}, "
            f"{findings._num(prim['ci95'][1])}] ({prim['verdict']})")


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
own test problems (`test_problems(n_test, "l1", seed)`); training draws from the train part.

L1's paper and code differ from this port in where Max starts (the Exact checkpoint, there), in n (the whole
response, there) and in the budget's form (a number in the prompt); Max's (clip(α(b − n), −1, 1) + 1)/2 is the
paper's clip with δ = 0.5 (budget.py's docstring has the details). L1-Max from the base model has little to learn
(its premise prices it; the `l1_recipe` lesson too), which is why the lab trains L1-Exact. L1's own recipe, Exact
first and Max from Exact on budgets a chain can reach, is the `l1_recipe` lesson (`reasonlab l1_recipe`).

{reading("l1")}
"""
