"""Thinking on a budget: the user sets it, the model learns to keep it (L1 / LCPO), compared with s1's forcing.

A budget model reads B<b> in place of "=" (task.budget_prompt_ids): "think for b chain steps", b = 0..8. It starts
from the base model (the budget embeddings are copies of "="'s, so at step 0 it behaves exactly as the base model) and
is trained with GRPO (rl.train) on L1's rewards, one budget drawn uniformly per prompt:
    L1-Exact  r = c - alpha * |b - n|
    L1-Max    r = c * clip(alpha * (b - n) + delta, 0, 1)
with c = 1 for the right answer and n = the chain steps written (Aggarwal & Welleck 2025, arXiv 2503.04697, eqs. 1
and 3). Where L1's code (cmu-l3/l1) differs from its paper (../shared/research/tts_star_anchors.md, L1 row, and the
math_reward.py versions the code index holds, which do not name their repository):
    - the length term is added to the correctness reward and only for a right answer (`final_score =
      reward + S_delta` under `if is_correct`); a wrong answer gets the plain correctness reward whatever its length,
      where the paper's Exact charges every sample alpha |b - n|;
    - Max: `get_delta_score_linear_both` gives (clip(-alpha (n - b), -1, 1) + 1) / 2, the paper's clip with alpha
      halved and delta = 0.5, added to c instead of multiplying it; and the paper's Max run is initialised from the
      Exact checkpoint, not from the base model (here every variant starts from the base model, as the issue asks);
    - n counts the whole response in the code (thinking + solution, l1 issue #23); here n counts chain steps only,
      the response's frame (format token, "A", the answer, </s>) being fixed;
    - the budget is a number written in the prompt ("Think for N tokens."); here it is one token per budget.
Against it: s1 forcing (Muennighoff et al. 2025, arXiv 2501.19393) on the base model, a T chain cut after b steps
(tts.budget_hook), and the fixed formats A / S / T. An optional SFT warm start on budget-annotated chains (the
longest fixed format that fits the budget) measures whether RL needs one. `classify_chain` names what a chain does
(its stride: digits summed per step), so the report can say what the model does with fewer steps than S needs.

Protocol: `run(config, seed) -> result` (JSON-able; written to <out>/seed<s>.json when config.out is set) and
`render(results_over_seeds, out) -> (markdown, headline)`.
"""
from __future__ import annotations

import copy
import os
import random
import time
from dataclasses import asdict, dataclass
from typing import Callable, Literal

import numpy as np
import torch

from . import findings as F
from .evaluate import problems_per_k
from .model import GPT
from .sampling import generate, sample_tree
from .task import (BUDGET0, BUDGET_VOCAB, BUDGETS, ID, IGNORE, K_MAX, K_MIN, MAX_LEN, VOCAB, budget_prompt_ids,
                   chain_steps, make_digits, parse, prompt_ids, solution)

VARIANTS = ("exact", "max", "exact+sft", "max+sft")
Variant = Literal["exact", "max", "exact+sft", "max+sft"]


@dataclass
class BudgetConfig:
    variants: tuple[Variant, ...] = ("exact", "max", "exact+sft", "max+sft")
    """trained budget models: L1-Exact, L1-Max, each optionally after an SFT warm start on budget-annotated chains"""
    steps: int = 100
    """GRPO steps per variant"""
    prompts_per_step: int = 16
    """problems per GRPO step (each with its own budget)"""
    num_generations: int = 8
    """samples per problem (the group)"""
    learning_rate: float = 1e-4
    """Adam learning rate"""
    beta: float = 0.04
    """KL weight to the starting model"""
    alpha: float = 0.25
    """L1's length weight per chain step (both rewards): one step off the budget costs Exact 0.25"""
    delta: float = 0.5
    """L1-Max's offset: a chain exactly at the budget earns half the reward, one step under it three quarters"""
    sft_steps: int = 300
    """supervised steps of the warm start (variants ending in +sft)"""
    sft_lr: float = 3e-3
    """peak learning rate of the warm start"""
    log_every: int = 10
    """per-budget training log: one record per this many GRPO steps"""
    eval_n: int = 100
    """greedy test problems per k (each evaluated at every budget)"""
    eval_seed: int = 777
    """seed of the test problems (training draws its own from the run's seed; no selection set is used: alpha and
    delta are fixed in advance, on L1's scale)"""
    n_examples: int = 3
    """example outputs kept per (variant, stride class) for b < ceil(k/2)"""
    out: str | None = None
    """write <out>/seed<s>.json when set"""

    def validate(self) -> None:
        for v in self.variants:
            if v not in VARIANTS:
                raise ValueError(f"unknown budget variant {v!r}: choose from {', '.join(VARIANTS)}")
        if not self.variants:
            raise ValueError("budget: at least one variant")
        for name in ("steps", "prompts_per_step", "num_generations", "eval_n", "log_every", "n_examples"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"budget: {name} must be a positive integer, got {getattr(self, name)!r}")
        if self.sft_steps < 0 or self.alpha <= 0 or self.beta < 0 or self.learning_rate <= 0 or self.sft_lr <= 0:
            raise ValueError("budget: sft_steps >= 0, alpha > 0, beta >= 0 and learning rates > 0")
        if self.num_generations < 2:
            raise ValueError("budget: GRPO needs num_generations >= 2")


QUICK = dict(steps=4, sft_steps=10, eval_n=8, log_every=2)


# ---------------------------------------------------------------------------------------------------------------
# The budget model and L1's rewards.

def budget_model(base: GPT) -> GPT:
    """The base model with BUDGET_VOCAB: old rows copied; each B<b> embedding a copy of "="'s (so the model starts as
    the base model on every budget); the new output rows copies of <pad>'s (never a target, so never written)."""
    if base.cfg.vocab_size >= len(BUDGET_VOCAB):
        return copy.deepcopy(base)
    c = base.cfg
    m = GPT(len(BUDGET_VOCAB), c.d_model, c.n_layers, c.n_heads, c.max_len).to(next(base.parameters()).device)
    sd = {k: v.clone() for k, v in base.state_dict().items()}
    V = c.vocab_size
    tok, head = m.tok.weight.detach().clone(), m.head.weight.detach().clone()
    tok[:V], head[:V] = sd["tok.weight"], sd["head.weight"]
    # B<b> = "=" + (b - 4)/4 * v, v a fixed random direction of norm 4 (a quarter of the embeddings' ~8 norm... times
    # two at the ends): Adam moves an embedding row by ~lr per coordinate and step, so copies of "=" stay within ~0.5
    # of each other over a whole run and the trained model ignored its budget (tried first: identical outputs at
    # every b); an ordinal offset the network can read from step 0 fixes that, at the price of a slightly perturbed
    # start (the rows B<b> near b = 4 are closest to the base model)
    g = torch.Generator().manual_seed(1234)
    v = torch.randn(c.d_model, generator=g)
    v = 4.0 * v / v.norm()
    tok[V:] = sd["tok.weight"][ID["="]]
    tok[BUDGET0:BUDGET0 + len(BUDGETS)] += torch.tensor([(b - 4) / 4 for b in BUDGETS])[:, None] * v.to(tok.device)
    head[V:] = sd["head.weight"][ID["<pad>"]]
    sd["tok.weight"], sd["head.weight"] = tok, head
    m.load_state_dict(sd)
    return m.eval()


def steps_of(parsed: dict) -> int:
    """Chain steps written: the running sums before "A" (0 for a direct answer or no format)."""
    return len(parsed["chain"])


def l1_exact(correct: float, budget: int, steps: int, alpha: float = 0.25) -> float:
    """L1-Exact (Aggarwal & Welleck 2025, eq. 1): r = c - alpha |b - n|."""
    return correct - alpha * abs(budget - steps)


def l1_max(correct: float, budget: int, steps: int, alpha: float = 0.25, delta: float = 0.5) -> float:
    """L1-Max (eq. 3): r = c * clip(alpha (b - n) + delta, 0, 1): a right answer within budget pays, more so the
    more budget it leaves; one over budget by delta / alpha steps or more pays nothing."""
    return correct * min(1.0, max(0.0, alpha * (budget - steps) + delta))


class BudgetProblem(list):
    """A problem's digits carrying the budget its prompt asks for (rl.train's problem_fn / prompt_fn / reward_fn see
    the digits only, so the budget rides along)."""
    budget: int = 0


def draw_problem(rng: random.Random, k: int) -> BudgetProblem:
    """k digits and a budget drawn uniformly from BUDGETS, per prompt as in L1."""
    p = BudgetProblem(make_digits(rng, k))
    p.budget = rng.choice(BUDGETS)
    return p


def reward_fn(kind: str, alpha: float, delta: float, log: dict | None = None) -> Callable:
    """(digits, parsed) -> L1 reward; also adds the sample to `log` (budget -> running sums) when given."""
    def r(d: BudgetProblem, p: dict) -> float:
        c = float(p["answer"] == sum(d) % 10)
        n, b = steps_of(p), d.budget
        if log is not None:
            s = log.setdefault(b, np.zeros(5))
            s += (1, n <= b, abs(n - b), c, tokens_used(p))
        return l1_exact(c, b, n, alpha) if kind == "exact" else l1_max(c, b, n, alpha, delta)
    return r


def annotated_output(digits: list[int], budget: int) -> list[str]:
    """The SFT warm start's target: the longest fixed format whose chain fits the budget (T, else S, else A)."""
    k = len(digits)
    fmt = "full" if budget >= k else "short" if budget >= len(chain_steps(k, "short")) else "direct"
    return solution(digits, fmt)


def sft_warm_start(model: GPT, steps: int, lr: float, seed: int, batch: int = 64) -> list[dict]:
    """Supervised fine-tuning on budget prompts with annotated outputs (train.train_on_batches: warmup + cosine)."""
    from .train import train_on_batches
    rng = random.Random(seed + 10_000)

    def get_batch(step):
        seq = np.full((batch, MAX_LEN), ID["<pad>"], dtype=np.int64)
        for i in range(batch):
            p = draw_problem(rng, rng.randint(K_MIN, K_MAX))
            ids = budget_prompt_ids(p, p.budget) + [ID[w] for w in annotated_output(p, p.budget)]
            seq[i, :len(ids)] = ids
        inp, tgt = torch.from_numpy(seq[:, :-1].copy()), torch.from_numpy(seq[:, 1:].copy())
        tgt[:, :K_MAX + 1] = IGNORE          # targets from "=" on (the format token is learned)
        tgt[tgt == ID["<pad>"]] = IGNORE
        return inp, tgt
    return train_on_batches(model, get_batch, steps, lr=lr, warmup=max(1, steps // 10), log=None)


def train_variant(base: GPT, variant: str, cfg: BudgetConfig, seed: int, progress: bool = False) -> dict:
    """One budget model: (SFT warm start,) GRPO with an L1 reward; returns the model, per-budget training logs and
    the seconds spent (SFT and RL, without evaluation)."""
    from .rl import RLConfig, every_n_steps, train
    kind = variant.split("+")[0]
    t0 = time.perf_counter()
    policy = budget_model(base)
    sft = []
    if variant.endswith("+sft") and cfg.sft_steps:
        sft = sft_warm_start(policy, cfg.sft_steps, cfg.sft_lr, seed)
    t_sft = time.perf_counter() - t0
    ref = copy.deepcopy(policy) if cfg.beta > 0 else None
    window: dict[int, np.ndarray] = {}
    logs: list[dict] = [{"step": 0, "by_budget": quick_adherence(policy, seed)}]

    def flush(rec, model):                # every log_every steps: the window's per-budget logs
        logs.append({"step": rec["step"], "by_budget": {b: cell(s) for b, s in sorted(window.items())}})
        window.clear()
    rcfg = RLConfig.preset("grpo", steps=cfg.steps, prompts_per_step=cfg.prompts_per_step,
                           num_generations=cfg.num_generations, learning_rate=cfg.learning_rate, beta=cfg.beta,
                           seed=seed, log_every=0)
    hist = train(policy, ref, rcfg, reward_fn=reward_fn(kind, cfg.alpha, cfg.delta, window), log=None,
                 progress=progress, callback=every_n_steps(cfg.log_every, flush), problem_fn=draw_problem,
                 prompt_fn=lambda d: budget_prompt_ids(d, d.budget))
    return {"model": policy, "logs": logs, "seconds": time.perf_counter() - t0, "sft_seconds": t_sft,
            "sft_loss": sft[-1]["loss"] if sft else None, "reward": [h.get("reward") for h in hist]}


def cell(s: np.ndarray) -> dict:
    """Running sums (n, within, |n - b|, correct, tokens) -> shares and means."""
    n = max(1.0, s[0])
    return {"n": int(s[0]), "within": s[1] / n, "abs_err": s[2] / n, "acc": s[3] / n, "tokens": s[4] / n}


def quick_adherence(model: GPT, seed: int, n: int = 8) -> dict:
    """Greedy adherence per budget on a few problems per k (the training log's step 0)."""
    probs = problems_per_k(n, seed=seed + 555)
    out = {}
    for b in BUDGETS:
        s = np.zeros(5)
        for d, o in zip(probs, generate(model, [budget_prompt_ids(d, b) for d in probs])):
            p = parse(o)
            s += (1, steps_of(p) <= b, abs(steps_of(p) - b), p["answer"] == sum(d) % 10, tokens_used(p))
        out[b] = cell(s)
    return out


# ---------------------------------------------------------------------------------------------------------------
# What a chain does: its stride.

def classify_chain(digits: list[int], chain: list[int]) -> str:
    """Name a chain by the digits it sums per step: "none" (no chain), "stride s" (running sums after every s-th digit
    and after the last: s = 1 is T, 2 is S, s >= k one step, the total), "truncated s" (right running sums of stride
    s that stop before the last digit), "irregular" (right running sums at positions of no single stride, ending
    at the last digit) or "wrong". Values are digits mod 10, so a chain can match a pattern by coincidence; the known
    chains come first (T, S, then T or S cut short) and only then new strides (3 up), so that "stride >= 3" is never
    a cut T or S chain whose values happen to match (a one-step T chain equals the total one time in ten)."""
    if not chain:
        return "none"
    k = len(digits)
    pref = [sum(digits[:i]) % 10 for i in range(1, k + 1)]
    strides = [[i for i in range(1, k + 1) if i % s == 0 or i == k] for s in range(1, k + 1)]
    full = lambda s: chain == [pref[i - 1] for i in strides[s - 1]]
    cut = lambda s: len(chain) < len(strides[s - 1]) and chain == [pref[i - 1] for i in strides[s - 1][:len(chain)]]
    order = [(1, full), (2, full), (1, cut), (2, cut)] + [(s, f) for f in (full, cut) for s in range(3, k + 1)]
    for s, test in order:
        if test(s):
            return f"stride {s}" if test is full else f"truncated {s}"
    # irregular: increasing positions i_1 < .. < i_m = k with chain[j] = pref[i_j - 1] (earliest match, greedy)
    at = 0
    for j, c in enumerate(chain):
        last = j == len(chain) - 1
        cand = [i for i in range(at + 1, k + 1) if pref[i - 1] == c and (not last or i == k)]
        if not cand:
            return "wrong"
        at = cand[0] if not last else k
    return "irregular"


STRIDE_GROUPS = ("none", "stride 1 (T)", "stride 2 (S)", "stride >= 3 (new)", "truncated", "irregular", "wrong")


def stride_group(label: str) -> str:
    """classify_chain's label -> one of STRIDE_GROUPS (for plots and tables)."""
    if label.startswith("stride"):
        s = int(label.split()[1])
        return STRIDE_GROUPS[s] if s <= 2 else STRIDE_GROUPS[3]
    return "truncated" if label.startswith("truncated") else label


# ---------------------------------------------------------------------------------------------------------------
# Evaluation: every (budget, k) cell, for budget models, s1 forcing on the base model and the fixed formats.

def tokens_used(p: dict) -> int:
    """Tokens up to the answer and a closing </s> (chain steps + 4, or 3 for a direct answer): s1 stops generating at
    the answer, so what a cut chain writes after it (the base model, forced to "A" mid-chain, often goes on) is not
    counted; the whole output when no answer was read."""
    if p["answer"] is None:
        return p["length"]
    return 3 if p["fmt"] == "direct" else len(p["chain"]) + 4


def score(problems: list[list[int]], outs: list[list[int]], b: int | None, keep_examples: int = 0) -> dict:
    """Per-k cells {acc, tokens, steps, within, abs_err, strides} for outputs at budget b (None: no budget)."""
    by_k: dict[int, list] = {}
    for d, o in zip(problems, outs):
        by_k.setdefault(len(d), []).append((d, o, parse(o)))
    res = {}
    for k, rows in sorted(by_k.items()):
        n = len(rows)
        steps = [steps_of(p) for _, _, p in rows]
        labels = [classify_chain(d, p["chain"]) for d, _, p in rows]
        groups: dict[str, int] = {}
        for lab in labels:
            groups[stride_group(lab)] = groups.get(stride_group(lab), 0) + 1
        c = {"acc": sum(p["answer"] == sum(d) % 10 for d, _, p in rows) / n,
             "tokens": sum(tokens_used(p) for _, _, p in rows) / n, "steps": sum(steps) / n,
             "strides": {g: v / n for g, v in groups.items()},
             "stride_labels": {lab: labels.count(lab) / n for lab in sorted(set(labels))}}
        if b is not None:
            c["within"] = sum(s <= b for s in steps) / n
            c["abs_err"] = sum(abs(s - b) for s in steps) / n
            c["acc_within"] = sum(p["answer"] == sum(d) % 10 and s <= b for (d, _, p), s in zip(rows, steps)) / n
        if keep_examples:
            ex: dict[str, list] = {}
            for (d, o, p), lab in zip(rows, labels):
                g = stride_group(lab)
                if len(ex.setdefault(g, [])) < keep_examples:
                    words = " ".join(VOCAB[t] if t < len(VOCAB) else "?" for t in o)
                    ex[g].append(f"{' '.join(map(str, d))} = {words}  ({lab}; answer {sum(d) % 10})")
            c["examples"] = ex
        res[k] = c
    return res


def needs(k: int) -> int:
    """ceil(k / 2): the steps S needs, the fewest of any chain the base model knows."""
    return len(chain_steps(k, "short"))


def eval_budget_model(model: GPT, problems: list[list[int]], n_examples: int = 0) -> dict:
    """{b: {k: cell}}: greedy, with each budget token."""
    out = {}
    for b in BUDGETS:
        outs = generate(model, [prompt_ids(d) for d in problems], budget=b)
        out[b] = score(problems, outs, b, n_examples)
    return out


def eval_forcing(base: GPT, problems: list[list[int]]) -> dict:
    """s1 budget forcing on the base model: a T chain, "A" forced after b steps (tts.budget_hook), greedy."""
    from .tts import budget_hook
    out = {}
    for b in BUDGETS:
        toks, _ = sample_tree(base, [prompt_ids(d) for d in problems], 1, None, 0.0, force=["T"],
                              logit_hook=budget_hook(max_chain=b))
        out[b] = score(problems, toks.tolist(), b)
    return out


def eval_fixed(base: GPT, problems: list[list[int]]) -> dict:
    """The fixed formats A / S / T on the base model (forced, greedy), no budget."""
    return {f: score(problems, generate(base, [prompt_ids(d) for d in problems], force=[f]), None) for f in "AST"}


def eval_baselines(base: GPT, problems: list[list[int]]) -> dict:
    """s1 forcing, the fixed formats and the base model's free choice (blind to the budget) on the test problems."""
    free = generate(base, [prompt_ids(d) for d in problems])
    return {"forcing": eval_forcing(base, problems), "fixed": eval_fixed(base, problems),
            "base_free": {b: score(problems, free, b) for b in BUDGETS}}


# ---------------------------------------------------------------------------------------------------------------
# The experiment.

def run(cfg: BudgetConfig, seed: int, base: GPT | None = None, cache: str | None = None, log: Callable | None = print,
        progress: bool = False) -> dict:
    """Train every variant from the base model of `seed`, evaluate it with forcing and the fixed formats."""
    cfg.validate()
    if base is None:
        from .train import base_model
        base = base_model(seed, cache=cache, log=log)
    base.eval()
    probs = problems_per_k(cfg.eval_n, seed=cfg.eval_seed)
    res: dict = {"seed": seed, "config": asdict(cfg), "variants": {}}
    for v in cfg.variants:
        t = time.perf_counter()
        tr = train_variant(base, v, cfg, seed, progress)
        if cfg.out:
            from .checkpoint import save_model
            save_model(os.path.join(cfg.out, f"model-{v.replace('+', '-')}-seed{seed}"), tr["model"],
                       {"variant": v, "seed": seed, "config": asdict(cfg)})
        res["variants"][v] = {"train_seconds": round(tr["seconds"], 1), "sft_seconds": round(tr["sft_seconds"], 1),
                              "sft_loss": tr["sft_loss"], "logs": tr["logs"], "reward": tr["reward"],
                              "eval": eval_budget_model(tr["model"], probs, cfg.n_examples)}
        if log:
            log(f"  budget {v}, seed {seed}: trained in {tr['seconds']:.1f}s, evaluated in "
                f"{time.perf_counter() - t - tr['seconds']:.1f}s")
    res.update(eval_baselines(base, probs))
    if cfg.out:
        from .checkpoint import write_json
        write_json(os.path.join(cfg.out, f"seed{seed}.json"), res)
    return res



# ---------------------------------------------------------------------------------------------------------------
# Statistics over seeds, s1's metrics, the equal-token comparison and the findings.

def methods_of(r: dict) -> dict:
    """{method name: {b: {k: cell}}} for one seed: the variants, s1 forcing and the fixed formats (same cell at
    every budget)."""
    out = {f"L1-{v}": r["variants"][v]["eval"] for v in variants_of(r)}
    out["s1 forcing (T cut at b)"] = r["forcing"]
    for f in "AST":
        out[f"always {f}"] = {b: r["fixed"][f] for b in BUDGETS}
    return out


def variants_of(r: dict) -> list[str]:
    """The variants in the order the run was asked for (a result read back from JSON has its keys sorted)."""
    return list(r["config"]["variants"])


def ks_of(r: dict) -> list[int]:
    return sorted(int(k) for k in r["fixed"]["A"])


def mean_cells(m: dict, key: str, cells) -> float:
    """Mean of `key` over (b, k) cells of one method and seed."""
    return float(np.mean([m[b][k][key] for b, k in cells]))


def cells_where(r: dict, low: bool | None) -> list[tuple[int, int]]:
    """(b, k) cells with b < ceil(k/2) (low=True), b >= ceil(k/2) (low=False), or all (None)."""
    return [(b, k) for b in BUDGETS for k in ks_of(r) if low is None or (b < needs(k)) == low]


def s1_metrics(m: dict, ks: list[int]) -> dict:
    """s1's metrics for one method and seed: Control = share of outputs within budget (steps <= b), Scaling = slope
    of accuracy against mean tokens over the budgets (least squares, per-budget means over k), Performance = best
    per-budget accuracy."""
    acc = [np.mean([m[b][k]["acc"] for k in ks]) for b in BUDGETS]
    tok = [np.mean([m[b][k]["tokens"] for k in ks]) for b in BUDGETS]
    within = [m[b][k].get("within", float(m[b][k]["steps"] <= b)) for b in BUDGETS for k in ks]
    slope = float(np.polyfit(tok, acc, 1)[0]) if np.ptp(tok) > 1e-9 else 0.0
    return {"control": float(np.mean(within)), "scaling": slope, "performance": float(max(acc))}


def equal_token_gain(m: dict, ref: dict, cells) -> float:
    """Mean over cells of (accuracy of m) - (accuracy of ref interpolated at m's mean tokens on ref's accuracy-
    against-tokens curve for that k, clamped at its ends): more accurate at equal tokens when > 0."""
    gains = []
    for b, k in cells:
        c = m[b][k]
        pts = sorted((ref[bb][k]["tokens"], ref[bb][k]["acc"]) for bb in BUDGETS)
        t, a = zip(*pts)
        gains.append(c["acc"] - float(np.interp(c["tokens"], t, a)))
    return float(np.mean(gains))


def findings(results: list[dict]) -> list[dict]:
    """Computed checks over seeds: claim, per-seed values, mean and 95 % CI, threshold, verdict."""
    out = []
    ms = [methods_of(r) for r in results]
    vs = variants_of(results[0])

    def add(claim, xs, thr, direction=">"):
        out.append(F.seed_check("8 budget", claim, "per seed, see the claim", [float(x) for x in xs], thr,
                                test=F.greater if direction == ">" else F.at_most))
    forcing = "s1 forcing (T cut at b)"
    for v in vs:
        name = f"L1-{v}"
        allc = [cells_where(r, None) for r in results]
        add(f"{name} reads its budget: mean chain steps at b = 8 exceed those at b = 0 by more than 1 (over k)",
            [np.mean([m[name][8][k]["steps"] - m[name][0][k]["steps"] for k in ks_of(r)])
             for r, m in zip(results, ms)], 1.0)
        if v.startswith("exact"):
            add(f"{name} tracks the budget: mean |steps - b| falls below the base model's free choice (reduction > 0)",
                [mean_cells(r["base_free"], "abs_err", c) - mean_cells(m[name], "abs_err", c)
                 for r, m, c in zip(results, ms, allc)], 0.0)
        else:
            add(f"{name} keeps the budget (Control): share of outputs with steps <= b above 0.9",
                [mean_cells(m[name], "within", c) for m, c in zip(ms, allc)], 0.9)
        add(f"{name} scales: accuracy rises with tokens across budgets (Scaling slope > 0)",
            [s1_metrics(m[name], ks_of(r))["scaling"] for r, m in zip(results, ms)], 0.0)
        for low, what in ((True, "b < ceil(k/2)"), (False, "b >= ceil(k/2)")):
            add(f"at equal tokens, {name} is more accurate than s1 forcing for {what} (gain > 0)",
                [equal_token_gain(m[name], m[forcing], cells_where(r, low)) for r, m in zip(results, ms)], 0.0)
            add(f"at equal budget, {name} is right within its budget (right answer, steps <= b) more often than s1 "
                f"forcing for {what} (gain > 0)",
                [mean_cells(m[name], "acc_within", c) - mean_cells(m[forcing], "acc_within", c)
                 for m, c in zip(ms, [cells_where(r, low) for r in results])], 0.0)
        lowc = [cells_where(r, True) for r in results]
        add(f"with b < ceil(k/2), {name} invents a chain of stride >= 3 in more than 5 % of problems",
            [np.mean([m[name][b][k]["strides"].get("stride >= 3 (new)", 0.0) for b, k in c])
             for m, c in zip(ms, lowc)], 0.05)
    for v in vs:
        if v.endswith("+sft") and v[:-4] in vs:
            cold, warm = f"L1-{v[:-4]}", f"L1-{v}"
            key = "within" if v.startswith("max") else "abs_err"
            sign = 1 if key == "within" else -1
            add(f"no SFT warm start needed: {cold} (RL from the base) reaches {warm}'s adherence "
                f"({'share within budget' if key == 'within' else '-mean |steps - b|'}) within 0.05 (difference > -0.05)",
                [sign * (mean_cells(m[cold], key, c) - mean_cells(m[warm], key, c))
                 for m, c in zip(ms, [cells_where(r, None) for r in results])], -0.05)
            add(f"no SFT warm start needed: {cold} is right within budget (right, steps <= b) within 0.02 as often "
                f"as {warm} over all budgets (difference > -0.02)",
                [mean_cells(m[cold], "acc_within", c) - mean_cells(m[warm], "acc_within", c)
                 for m, c in zip(ms, [cells_where(r, None) for r in results])], -0.02)
            spread = lambda m, r, n: np.mean([m[n][8][k]["steps"] - m[n][0][k]["steps"] for k in ks_of(r)])
            add(f"no SFT warm start needed: {cold} reads its budget within one step as well as {warm} (steps at b = 8 "
                f"minus steps at b = 0, difference > -1)",
                [spread(m, r, cold) - spread(m, r, warm) for r, m in zip(results, ms)], -1.0)
    return out


# ---------------------------------------------------------------------------------------------------------------
# The section: plots, tables, findings.

def _ms(xs, f="{:.2f}") -> str:
    """report.pm at two decimals (report is imported when a report is made, not with this module)."""
    from .report import pm
    return pm(xs, f)


def plot_accuracy(results: list[dict], path: str) -> str:
    """Accuracy against budget per k, one line per method (mean over seeds, band = min..max), chance dashed."""
    from .report import plt, save
    ks, ms = ks_of(results[0]), [methods_of(r) for r in results]
    fig, axes = plt.subplots(2, 4, figsize=(16, 7.5), sharey=True, layout="constrained")
    for ax, k in zip(axes.flat, ks):
        for name in ms[0]:
            acc = np.array([[m[name][b][k]["acc"] for b in BUDGETS] for m in ms])
            style = ":" if name.startswith("always") else "--" if name.startswith("s1") else "-"
            ax.plot(BUDGETS, acc.mean(0), style, marker="o" if style == "-" else None, ms=3, label=name)
            if style == "-":
                ax.fill_between(BUDGETS, acc.min(0), acc.max(0), alpha=0.15)
        ax.axhline(0.1, color="grey", lw=0.8, ls="--")
        ax.axvline(needs(k) - 0.5, color="k", lw=0.5, alpha=0.4)
        ax.set_title(f"k = {k} (S needs {needs(k)} steps)")
        ax.set_xlabel("budget b (chain steps)")
    axes.flat[0].set_ylabel("greedy accuracy")
    axes.flat[-1].axis("off")
    h, lab = axes.flat[0].get_legend_handles_labels()
    axes.flat[-1].legend(h + [plt.Line2D([], [], color="grey", ls="--")], lab + ["chance 0.1"], loc="center")
    fig.suptitle("Accuracy against budget (mean over seeds, band = min..max; vertical line: b = ceil(k/2))")
    return save(fig, path)


def plot_strides(results: list[dict], path: str) -> str:
    """Stride mix of the trained models' chains, by budget (x) and k (panels), mean over seeds."""
    from .report import plt, save
    vs, ks = variants_of(results[0]), ks_of(results[0])
    colors = dict(zip(STRIDE_GROUPS, ["#4C72B0", "#55A868", "#DD8452", "#C44E52", "#8172B2", "#937860", "#999999"]))
    fig, axes = plt.subplots(len(vs), len(ks), figsize=(2.3 * len(ks), 2.4 * len(vs) + 0.6), sharey=True, squeeze=False,
                             layout="constrained")
    for i, v in enumerate(vs):
        for j, k in enumerate(ks):
            ax, bottom = axes[i][j], np.zeros(len(BUDGETS))
            for g in STRIDE_GROUPS:
                y = np.array([np.mean([r["variants"][v]["eval"][b][k]["strides"].get(g, 0.0) for r in results])
                              for b in BUDGETS])
                ax.bar(BUDGETS, y, bottom=bottom, color=colors[g], label=g, width=0.85)
                bottom += y
            ax.axvline(needs(k) - 0.5, color="k", lw=0.8)
            ax.set_title(f"L1-{v}, k = {k}", fontsize=8)
            ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=6, loc="lower left")
    fig.supxlabel("budget b (vertical line: b = ceil(k/2))")
    fig.supylabel("share of outputs")
    return save(fig, path)


def plot_adherence(results: list[dict], path: str) -> str:
    """Left: steps written against budget (mean over k and seeds) per method, diagonal = exact adherence.
    Right: share within budget during training, per variant (mean over budgets and seeds)."""
    from .report import plt, save
    ks, ms = ks_of(results[0]), [methods_of(r) for r in results]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5), layout="constrained")
    for name in ms[0]:
        if name.startswith("always"):
            continue
        y = np.array([[np.mean([m[name][b][k]["steps"] for k in ks]) for b in BUDGETS] for m in ms])
        a1.errorbar(BUDGETS, y.mean(0), yerr=y.std(0), marker="o", ms=3, capsize=2, label=name)
    a1.plot(BUDGETS, BUDGETS, "k:", lw=0.8, label="steps = b")
    a1.set_xlabel("budget b")
    a1.set_ylabel("chain steps written (mean over k = 2..8)")
    a1.legend(fontsize=8)
    for v in variants_of(results[0]):
        logs = [r["variants"][v]["logs"] for r in results]
        steps = [l["step"] for l in logs[0]]
        y = np.array([[np.mean([c["within"] for c in l["by_budget"].values()]) for l in lg] for lg in logs])
        a2.plot(steps, y.mean(0), marker="o", ms=3, label=f"L1-{v}")
    a2.set_xlabel("GRPO step (step 0: greedy, before RL)")
    a2.set_ylabel("share within budget (steps <= b)")
    a2.set_ylim(0, 1.02)
    a2.legend(fontsize=8)
    fig.suptitle("Adherence: steps against budget after training; share within budget during training")
    return save(fig, path)


def render(results: list[dict], out: str, prefix: str = "") -> tuple[str, str]:
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
    for n in [f"L1-{v}" for v in vs] + ["s1 forcing (T cut at b)"]:
        mm = [s1_metrics(m[n], ks) for m in ms]
        s1.append(f"| {n} | {_ms([x['control'] for x in mm])} | {_ms([x['scaling'] for x in mm], '{:.3f}')} | "
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
    fs = findings(results)
    f_lines = F.table(fs)
    secs = "; ".join(f"L1-{v} {_ms([r['variants'][v]['train_seconds'] for r in results], '{:.0f}')} s"
                     for v in vs)
    cfg = results[0]["config"]
    main = "L1-" + next((v for v in ("max+sft", "max", "exact+sft") if v in vs), vs[0])
    gain = next((f for f in fs if f["claim"].startswith(f"at equal tokens, {main} ") and "b < " in f["claim"]), None)
    ctrl = [s1_metrics(m[main], ks)["control"] for m in ms]
    headline = (f"{main}: within budget {_ms(ctrl)}, best accuracy "
                f"{_ms([s1_metrics(m[main], ks)['performance'] for m in ms])}"
                + (f"; vs s1 forcing at equal tokens for b < ⌈k/2⌉: {gain['value']:+.3f} "
                   f"[{F._num(gain['ci95'][0])}, {F._num(gain['ci95'][1])}] ({gain['verdict']})" if gain else ""))
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

**s1's metrics** (Muennighoff et al. 2025): Control = share within budget, Scaling = least-squares slope of
accuracy against mean tokens over the budgets, Performance = best per-budget accuracy:

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

**Findings** (computed on this run; 95 % t-intervals over seeds; holds / does not hold / inconclusive):

{f_lines}

GRPO ({cfg['steps']} steps, {cfg['prompts_per_step']} problems × {cfg['num_generations']} samples, lr
{cfg['learning_rate']:g}, β {cfg['beta']:g}), one budget drawn uniformly per problem; α = {cfg['alpha']:g} per
step, δ = {cfg['delta']:g}; `+sft` variants first fine-tune {cfg['sft_steps']} steps on budget-annotated outputs
(the longest fixed format within the budget). Training time per seed: {secs}. s1 forcing forces a T chain on the
base model and forces "A" after b steps (`tts.budget_hook`); equal tokens: each budget model's accuracy minus the
forcing curve's (per k, interpolated at the same mean tokens; tokens up to the answer and </s>): a model that ignores
its budget and writes a full chain wins that comparison by overspending, which the "right within budget" check
does not let it do. L1's code differs
from its paper: the length term is added only to right answers, Max uses (clip(α(b − n), −1, 1) + 1)/2 (α halved),
Max starts from the Exact checkpoint, and n counts the whole response (budget.py's docstring has the details).

*Papers:* L1 / LCPO (Aggarwal & Welleck 2025, arXiv 2503.04697); s1 (Muennighoff et al. 2025, arXiv 2501.19393).
*Explore:* `reasonlab budget --variants exact max exact+sft max+sft --alpha 0.1`, `reasonlab sample "3 5 9 2 7"
--budget 1 --checkpoint runs/budget/model-max-sft-seed0` (a model the CLI saved).
"""
    return md, headline
